-- Job $1 of lease $2 parks waiting for a callback for at most $3 ms. The
-- callback id comes from gen_random_uuid(): 122 random bits from a
-- cryptographic source, so nobody can guess a waiting job's id.
UPDATE jobs AS j
   SET state = 'waiting_external', callback_id = gen_random_uuid(),
       callback_timeout_at = now() + $3::bigint * interval '1 millisecond',
       callback_result = NULL, batch_id = NULL
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'waiting_external', 'callback_id', j.callback_id,
            'callback_timeout_at', j.callback_timeout_at,
            'callback_result', NULL)) AS row_json
