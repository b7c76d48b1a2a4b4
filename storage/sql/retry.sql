-- Job $1 of lease $2 failed and runs again after $5 ms, or (when $5 is
-- NULL) after the retry backoff (actor_worker_retry_backoff), unless this
-- failure was its last allowed attempt ($4: the worker's max_retries).
UPDATE jobs_in AS j
   SET state = 'scheduled', error_count = j.error_count + 1,
       last_error_message = $3, last_failed_at = now(),
       run_at = now() + coalesce($5::bigint * interval '1 millisecond',
                                 actor_worker_retry_backoff(j.error_count)),
       batch_id = NULL
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
   AND j.error_count + 1 < coalesce(j.max_attempts, $4::integer + 1)
   AND j.error_count < 999999
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'scheduled', 'error_count', j.error_count,
            'last_error_message', j.last_error_message,
            'last_failed_at', j.last_failed_at, 'run_at', j.run_at)) AS row_json
