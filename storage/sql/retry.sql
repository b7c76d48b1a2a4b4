-- Reschedules after $5 ms, or (when $5 is NULL) after the retry backoff
-- (migrations/005_retry_backoff.sql), unless this failure was the job's
-- last allowed attempt.
UPDATE job_rows AS j
   SET state = 'scheduled', error_count = error_count + 1,
       last_error_message = $3, last_failed_at = now(),
       run_at = now() + coalesce($5::bigint * interval '1 millisecond',
                                 actor_worker_retry_backoff(error_count)),
       locked_by = NULL, locked_at = NULL, deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2 AND attempt = $6
   AND error_count + 1 < coalesce(max_attempts, $4::integer + 1)
RETURNING actor_worker_row_json(j)::text AS row_json
