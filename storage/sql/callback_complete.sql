-- A waiting job is a row-per-state row (never on a lane): these update it
-- directly; its JSON leaves out the internal lane key, as the view does.
UPDATE job_rows AS j
   SET state = 'completed', finalized_at = now(), callback_result = $2::jsonb,
       callback_timeout_at = NULL
 WHERE callback_id = $1::uuid AND state = 'waiting_external'
RETURNING actor_worker_row_json(j)::text AS row_json
