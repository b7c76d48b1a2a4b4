UPDATE job_rows AS j
   SET state = 'scheduled', run_at = now() + $3::bigint * interval '1 millisecond',
       locked_by = NULL, locked_at = NULL, deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2 AND attempt = $4
RETURNING actor_worker_row_json(j)::text AS row_json
