-- Which of the jobs $1 (held by this worker) an operator asked to cancel
-- (`jobs cancel`); the heartbeat round asks, in case the NOTIFY was missed.
SELECT job_id FROM job_cancel_requests WHERE job_id = ANY ($1::bigint[])
