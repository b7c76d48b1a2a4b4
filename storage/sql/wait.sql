-- Job $1 of lease $2 parks waiting for a callback for at most $3 ms. The
-- callback id comes from gen_random_uuid(): 122 random bits from a
-- cryptographic source, so nobody can guess a waiting job's id. An id this
-- run registered while it ran (callback_register.sql) is kept, with its
-- timeout, and so is a resolution that came for it meanwhile (`early`,
-- which the caller applies at once, in this transaction). The row is
-- locked first (FOR UPDATE): a resolution kept concurrently is then seen,
-- never overwritten.
WITH run AS (
  SELECT j.id, j.callback_lease IS NOT DISTINCT FROM $2::bigint AS registered,
         j.callback_early
    FROM jobs_in AS j
   WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
     FOR UPDATE OF j
)
UPDATE jobs_in AS j
   SET state = 'waiting_external',
       callback_id = CASE WHEN r.registered THEN j.callback_id
                          ELSE gen_random_uuid() END,
       callback_timeout_at =
         CASE WHEN r.registered THEN j.callback_timeout_at
              ELSE now() + $3::bigint * interval '1 millisecond' END,
       callback_result = NULL, batch_id = NULL, callback_lease = NULL,
       callback_early = NULL
  FROM run AS r
 WHERE j.id = r.id AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'waiting_external', 'callback_id', j.callback_id,
            'callback_timeout_at', j.callback_timeout_at,
            'callback_result', NULL)) AS row_json,
          j.callback_id::text AS callback_id,
          CASE WHEN r.registered THEN r.callback_early END::text AS early
