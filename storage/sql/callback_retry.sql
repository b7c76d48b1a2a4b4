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
