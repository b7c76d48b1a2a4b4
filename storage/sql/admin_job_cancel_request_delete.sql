-- Forgets the cancel request of job $1 (it ended, or runs again on
-- request).
DELETE FROM job_cancel_requests WHERE job_id = $1
