-- A callback retries (event `retried`) or resumes (no event) its waiting
-- job: back to `available` at once, not charged, the payload stored in
-- callback_result; its queue's workers are woken.
WITH resumed AS (
  UPDATE job_rows AS j
     SET state = 'available', run_at = now(), callback_result = $2::jsonb,
         callback_timeout_at = NULL
   WHERE callback_id = $1::uuid AND state = 'waiting_external'
  RETURNING j.*
), woken AS (
  SELECT pg_notify($3, queue) FROM resumed
)
SELECT actor_worker_row_json(r)::text AS row_json,
       (SELECT count(*) FROM woken) AS woken
  FROM resumed AS r
