-- Transactional handlers' groups (docs/transactional.md): the group's lease,
-- its limits, and the end of a server process whose COMMIT is in doubt.

-- name: transactional_lease
-- A transactional group's transaction (job_store::transact) holds the
-- leases of its row-claimed jobs: each job $2[i] is still a running row of
-- batch $3[i] of worker $1, and no rescue took the batch back (lane jobs:
-- transactional_lane_lease.sql). Returns the ids it holds. The
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

-- name: transactional_lane_lease
-- A transactional group's transaction (job_store::transact) holds the
-- leases of its lane jobs ($3, leases $2, worker $1) without writing them
-- (storage/sql/functions/actor_worker_transactional_lease.sql); the ids
-- held.
SELECT actor_worker_transactional_lease($1, $2::bigint[], $3::bigint[]) AS id

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

-- name: transactional_limits
-- The first statement of a transactional group's transaction
-- (job_store::transact_group): no statement of it, and no pause between
-- its statements, may last longer than $1 (milliseconds as text, such as
-- '30000'), which is shorter than what is left of every run's lease and
-- deadline; and no lock may be waited for longer than $2 (milliseconds as
-- text; '0' = as long as the statement may last). Past the first the
-- server ends the transaction, so a handler that hangs can never hold its
-- jobs' rows or its connection for longer; past the second only the
-- waiting statement fails, and its run goes on alone (a group waits for
-- no other transaction's locks, so two groups never hold each other up).
-- Handlers read the worker their runs belong to (the jobs' locked_by, $3)
-- as current_setting('actor_worker.worker').
SELECT set_config('statement_timeout', $1, true),
       set_config('idle_in_transaction_session_timeout', $1, true),
       set_config('lock_timeout', $2, true),
       set_config('actor_worker.worker', $3, true)

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
