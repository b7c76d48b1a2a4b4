-- `jobs cancel` of a running job: records the request (durable: a worker
-- that misses the NOTIFY finds it on its next heartbeat) and tells every
-- worker on channel $2; the one running job $1 cancels it.
WITH request AS (
  INSERT INTO job_cancel_requests (job_id) VALUES ($1)
  ON CONFLICT (job_id) DO UPDATE SET requested_at = now()
  RETURNING job_id
)
SELECT pg_notify($2, r.job_id::text) AS notified FROM request AS r
