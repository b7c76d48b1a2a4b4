-- Callbacks: a parked job's id, registered while it runs or at the park,
-- and its resolution (docs/storage.md, "Callback ids registered while running").

-- name: callback_register
-- Run $3 (a lease) of worker $1 registers a callback id for job $2 while
-- the job runs, timing out $4 ms from now (job_context::register_callback).
-- Only the run that holds the job may: a row-claimed job is a running row
-- of that batch; a lane job (bit 0 of the lease) is still on the lane, its
-- batch neither rescued nor holding a receipt for it. The lane row keeps
-- its lane state: the id and the lease are all that is written. FOR KEY
-- SHARE of the batch holds a rescue off until this commits. The id comes
-- from gen_random_uuid(), as at a park: unguessable. Returns it, or no
-- row when the run is no longer the job's.
WITH batch AS (
  SELECT b.id FROM job_batches AS b
   WHERE b.id = $3 AND b.worker = $1 AND b.rescued_at IS NULL
     FOR KEY SHARE
)
UPDATE jobs_in AS j
   SET callback_id = gen_random_uuid(),
       callback_timeout_at = now() + $4::bigint * interval '1 millisecond',
       callback_lease = $3, callback_early = NULL
 WHERE j.id = $2 AND EXISTS (SELECT 1 FROM batch)
   AND ((j.batch_id = $3 AND j.state = 'running')
        OR (($3::bigint & 1) = 1 AND j.ready_xid <> '0'
            AND j.state = 'available'
            AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                             WHERE r.batch_id = $3 AND r.bucket = $2::bigint >> 6
                               AND actor_worker_has_bit(r.mask, $2))))
RETURNING j.callback_id::text AS callback_id

-- name: callback_lock
-- The job of callback $1, locked for its resolution: its state as written,
-- and whether the run that registered the id while it ran (callback_lease)
-- still holds it (the predicate of callback_register.sql: its batch not
-- rescued, the job a running row of it or still on the lane in it), so
-- that a resolution can be kept until that run parks the job. The lock
-- orders a resolution and a park: whichever comes second sees the other.
SELECT j.id, j.state, j.callback_early IS NOT NULL AS kept,
       coalesce(j.callback_lease IS NOT NULL
       AND EXISTS (SELECT 1 FROM job_batches AS b
                    WHERE b.id = j.callback_lease AND b.rescued_at IS NULL)
       AND ((j.batch_id = j.callback_lease AND j.state = 'running')
            OR ((j.callback_lease & 1) = 1 AND j.ready_xid <> '0'
                AND j.state = 'available'
                AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                                 WHERE r.batch_id = j.callback_lease
                                   AND r.bucket = j.id >> 6
                                   AND actor_worker_has_bit(r.mask, j.id)))), false)
         AS running
  FROM jobs_in AS j
 WHERE j.callback_id = $1::uuid
   FOR UPDATE OF j

-- name: callback_job
-- The job of callback $1, whatever became of it: why a callback changed
-- nothing (no such callback, or its job no longer waits: finished, back in
-- the queue, or dead-lettered by an earlier resolution).
SELECT id::text AS id, state FROM jobs WHERE callback_id = $1::uuid
UNION ALL
SELECT original_job_id::text, 'dead_lettered'
  FROM dead_letter_jobs WHERE callback_id = $1::uuid
LIMIT 1

-- name: callback_keep
-- Keeps resolution $2 ({"action", "payload", "error"}) of callback $1,
-- whose job still runs (locked by callback_lock.sql): applied when that
-- run parks the job (wait.sql). Returns the job's row as hooks see it.
UPDATE jobs_in AS j SET callback_early = $2::jsonb
 WHERE j.callback_id = $1::uuid
RETURNING actor_worker_job_json(j.id, '{}'::jsonb) AS row_json

-- name: callback_complete
-- Callback $1 completes its waiting job with payload $2. A waiting job is
-- always off the lanes: its row is its state.
UPDATE jobs_in AS j
   SET state = 'completed', finalized_at = now(), callback_result = $2::jsonb,
       callback_timeout_at = NULL
 WHERE j.callback_id = $1::uuid AND j.state = 'waiting_external'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'completed', 'finalized_at', j.finalized_at,
            'callback_result', j.callback_result,
            'callback_timeout_at', NULL)) AS row_json

-- name: callback_fail
-- Callback $1 fails its waiting job: it moves to the dead letter queue
-- with $2 as its last error (actor_worker_dead_letter).
SELECT actor_worker_dead_letter(j.id, $2) AS row_json
  FROM (SELECT r.id FROM jobs_in AS r
         WHERE r.callback_id = $1::uuid AND r.state = 'waiting_external'
           FOR UPDATE) AS j

-- name: callback_retry
-- A callback retries (event `retried`) or resumes (no event) its waiting
-- job: back to `available` at once, off the lanes, not charged, the
-- payload stored in callback_result; its queue's workers are woken
-- (channel $3).
WITH resumed AS (
  UPDATE jobs_in AS j
     SET state = 'available', run_at = now(), callback_result = $2::jsonb,
         callback_timeout_at = NULL
   WHERE j.callback_id = $1::uuid AND j.state = 'waiting_external'
  RETURNING j.id, j.queue, j.run_at, j.callback_result
), woken AS (
  SELECT pg_notify($3, queue) FROM resumed
)
SELECT actor_worker_job_json(r.id, jsonb_build_object(
         'state', 'available', 'run_at', r.run_at,
         'callback_result', r.callback_result,
         'callback_timeout_at', NULL)) AS row_json,
       (SELECT count(*) FROM woken) AS woken
  FROM resumed AS r
