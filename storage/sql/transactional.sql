-- Transactional handlers' groups (docs/transactional.md): the group's lease,
-- its limits, and the end of a server process whose COMMIT is in doubt.

-- name: transactional_lease
-- A transactional group's transaction (job_store::transact) holds the
-- leases of its row-claimed jobs: each job $2[i] is still a running row of
-- batch $3[i] of worker $1, and no rescue took the batch back (lane jobs:
-- transactional_begin). Returns the ids it holds. The
-- row locks keep everything else that would finish or move those jobs (a
-- release, a rescue, an outcome recorded the usual way) waiting until this
-- transaction ends; they then find the rows finished, or still running if
-- it rolled back. FOR KEY SHARE of the batches makes a rescue (FOR UPDATE
-- SKIP LOCKED) pass them by, as while an outcome commits. `j.id = ANY`
-- finds the rows by the id index of each partition; id order locks them in
-- one order whatever the group.
SELECT j.id
  FROM unnest($2::bigint[], $3::bigint[]) AS u(id, batch)
  JOIN jobs_in AS j ON j.id = u.id AND j.batch_id = u.batch
  JOIN job_batches AS b ON b.id = j.batch_id
 WHERE j.id = ANY ($2::bigint[]) AND j.state = 'running'
   AND b.worker = $1 AND b.rescued_at IS NULL
 ORDER BY j.id
   FOR NO KEY UPDATE OF j
   FOR KEY SHARE OF b

-- name: transactional_begin
-- The first statement of a transactional group's transaction
-- (job_store::transact): its limits ($1: statement and idle limit, $2:
-- lock_timeout, milliseconds as text), its worker ($3), and the leases of
-- its lane jobs ($5, leases $4), held until it ends
-- (storage/sql/functions/actor_worker_transactional_begin.sql); the ids
-- held.
SELECT actor_worker_transactional_begin($1, $2, $3, $4::bigint[], $5::bigint[]) AS id

-- name: transactional_complete_lane
-- Completions of the lane jobs ($3, leases $2) of worker $1 that
-- transactional_begin holds in this transaction: receipts, the rows
-- deleted when $4 (completed_retention 0); the ids recorded
-- (storage/sql/functions/actor_worker_transactional_complete.sql).
SELECT actor_worker_transactional_complete($1, $2::bigint[], $3::bigint[], $4) AS id

-- name: transactional_held
-- After a transactional handler's COMMIT got no reply (job_store::transact,
-- once the server process that sent it is gone): does lease $3 of worker
-- $1 still hold job $2? It does while the job is a running row of that
-- batch, or (a lane batch, bit 0 of the id) still on the lane in it, no
-- receipt naming it: then the commit did not happen. Otherwise the job
-- left the batch, and only that commit could have moved it: this worker
-- still heartbeats the batch, so no rescue took it, and the lock on its
-- row kept every other writer out while the transaction was open.
SELECT EXISTS (
         SELECT 1 FROM jobs_in AS j
          WHERE j.id = $2 AND j.batch_id = $3 AND j.state = 'running')
       OR (($3::bigint & 1) = 1 AND EXISTS (
             SELECT 1 FROM job_batches AS b
              WHERE b.id = $3 AND b.worker = $1 AND b.rescued_at IS NULL)
           AND NOT EXISTS (
             SELECT 1 FROM batch_receipts AS r
              WHERE r.batch_id = $3 AND r.bucket = $2::bigint >> 6
                AND actor_worker_has_bit(r.mask, $2))) AS held

-- name: backend_start
-- This session's server process and when it started, for
-- transactional_terminate.sql.
SELECT pg_backend_pid() AS pid, backend_start::text AS started
  FROM pg_stat_activity WHERE pid = pg_backend_pid()

-- name: transactional_terminate
-- The server process $1 (started at $2) that sent a transactional
-- handler's COMMIT whose reply never came (job_store::transact): ended if
-- it is still there, so that its commit has happened or never will before
-- anyone reads what became of the job. The start time tells it from a
-- later process that got the same pid. A row while it is still there.
SELECT pg_terminate_backend(a.pid)
  FROM pg_stat_activity AS a
 WHERE a.pid = $1 AND a.backend_start = $2::timestamptz
