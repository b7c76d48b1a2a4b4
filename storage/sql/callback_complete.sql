-- Callback $1 completes its waiting job with payload $2. A waiting job is
-- always off the lanes: its row is its state.
UPDATE jobs_in AS j
   SET state = 'completed', finalized_at = now(), callback_result = $2::jsonb,
       callback_timeout_at = NULL
 WHERE j.callback_id = $1::uuid AND j.state = 'waiting_external'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'completed', 'finalized_at', j.finalized_at,
            'callback_result', j.callback_result,
            'callback_timeout_at', NULL)) AS row_json
