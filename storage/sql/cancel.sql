UPDATE job_rows AS j
   SET state = 'cancelled', finalized_at = now(), last_error_message = $3,
       deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2 AND attempt = $5
RETURNING actor_worker_row_json(j)::text AS row_json,
          CASE WHEN ordering_key IS NOT NULL
               THEN pg_notify($4, queue) END AS woken
