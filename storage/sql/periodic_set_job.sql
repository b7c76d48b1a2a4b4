-- The job enqueued for schedule $1's tick, in the transaction that took it.
UPDATE periodic_schedules SET last_job_id = $2 WHERE name = $1
