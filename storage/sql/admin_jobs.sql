-- `actor-worker jobs ...`: an operator's reads and changes of jobs (docs/cli.md).

-- name: admin_job
-- One job as JSON, as jobs shows it (`actor-worker jobs show`).
SELECT row_to_json(j)::text AS job FROM jobs AS j WHERE j.id = $1

-- name: admin_job_state
-- Where job $1 is: its state and holder (as jobs shows them), its
-- lane (queue, priority), and whether its row is on that lane.
SELECT v.state, v.locked_by, v.queue, v.priority,
       (SELECT r.ready_xid <> '0' FROM jobs_in AS r WHERE r.id = v.id LIMIT 1)
         AS on_lane
  FROM jobs AS v WHERE v.id = $1

-- name: admin_jobs_list
-- One page of `jobs list`: at most $5 jobs of `jobs` with id > $1, in id
-- order (keyset pagination: the next page starts after the last id),
-- optionally of state $2, queue $3 and kind $4 ('' = any), as one JSON
-- array. No count: the page stops at the limit. Sent with its parameters
-- (planned for them): a state filter leaves only the view's branches that
-- can hold that state.
SELECT coalesce(json_agg(p.j ORDER BY p.id), '[]')::text AS jobs
  FROM (SELECT j.id, row_to_json(j) AS j
          FROM jobs AS j
         WHERE j.id > $1
           AND ($2 = '' OR j.state = $2)
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
         ORDER BY j.id
         LIMIT $5) AS p

-- name: admin_job_preexisting
-- Job $1 as it was before this transaction: its state and holder, or no
-- row when this transaction inserted it (a unique enqueue that found a
-- duplicate returns the existing job's id).
SELECT v.state, v.locked_by
  FROM jobs AS v
 WHERE v.id = $1
   AND (SELECT r.xmin FROM jobs_in AS r WHERE r.id = $1 LIMIT 1)
       <> pg_current_xact_id()::xid

-- name: admin_job_lock_lane
-- Takes lane ($1, $2) for the rest of the transaction: a claim of that
-- lane waits (and one in flight is waited for), so the next statement
-- sees whether the job was claimed and no claim takes it meanwhile. The
-- lane's claims take turns on this lock (actor_worker_claim).
SELECT pg_advisory_xact_lock(hashtext($1), $2::integer)

-- name: admin_job_lock_row
-- Locks job $1's row for the rest of the transaction: a row claim in
-- flight is waited for, and the next statement sees what it committed.
SELECT 1 FROM jobs_in WHERE id = $1 FOR UPDATE

-- name: admin_job_cancel
-- `jobs cancel` of a job that has not started: it becomes cancelled at
-- once, off its lane. A job of an ordering key wakes its queue: the next
-- job of the key may run now. $2: the notify channel.
UPDATE jobs_in AS j
   SET state = 'cancelled', finalized_at = now(), ready_xid = '0',
       batch_id = NULL, callback_timeout_at = NULL,
       last_error_message = 'cancelled by an operator (actor-worker jobs cancel)'
  FROM jobs AS v
 WHERE j.id = $1 AND v.id = j.id
   AND v.state IN ('scheduled', 'available', 'waiting_external')
RETURNING j.queue,
          CASE WHEN j.ordering_key IS NOT NULL
               THEN pg_notify($2, j.queue) END AS woken

-- name: admin_job_cancel_request
-- `jobs cancel` of a running job: records the request (durable: a worker
-- that misses the NOTIFY finds it on its next heartbeat) and tells every
-- worker on channel $2; the one running job $1 cancels it.
WITH request AS (
  INSERT INTO job_cancel_requests (job_id) VALUES ($1)
  ON CONFLICT (job_id) DO UPDATE SET requested_at = now()
  RETURNING job_id
)
SELECT pg_notify($2, r.job_id::text) AS notified FROM request AS r

-- name: admin_job_cancel_request_delete
-- Forgets the cancel request of job $1 (it ended, or runs again on
-- request).
DELETE FROM job_cancel_requests WHERE job_id = $1

-- name: admin_job_rerun
-- `jobs retry` of a finished job (completed or cancelled): it runs again as
-- a new attempt, due now, off the lanes (a completed lane job's batch
-- would still show it completed). The attempt jobs counted is
-- written down, so the next run counts on from it. $2: the notify channel.
UPDATE jobs_in AS r
   SET state = 'available', ready_xid = '0', run_at = now(),
       attempt = v.attempt, finalized_at = NULL, batch_id = NULL,
       callback_timeout_at = NULL
  FROM jobs AS v
 WHERE r.id = $1 AND v.id = r.id AND v.state IN ('completed', 'cancelled')
RETURNING r.queue, pg_notify($2, r.queue) AS woken

-- name: admin_job_run_now
-- `jobs retry` of a job that waits for its run_at (scheduled, or available
-- after a failed attempt): due now. $2: the notify channel.
UPDATE jobs_in AS j SET run_at = least(j.run_at, now())
  FROM jobs AS v
 WHERE j.id = $1 AND v.id = j.id AND v.state IN ('scheduled', 'available')
RETURNING j.queue, pg_notify($2, j.queue) AS woken
