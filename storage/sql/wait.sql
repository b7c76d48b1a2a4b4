-- The callback id comes from gen_random_uuid(): 122 random bits from a
-- cryptographic source, so nobody can guess a waiting job's id.
UPDATE job_rows AS j
   SET state = 'waiting_external', callback_id = gen_random_uuid(),
       callback_timeout_at = now() + $3::bigint * interval '1 millisecond',
       callback_result = NULL, locked_by = NULL, locked_at = NULL,
       deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2 AND attempt = $4
RETURNING actor_worker_row_json(j)::text AS row_json
