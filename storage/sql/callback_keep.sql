-- Keeps resolution $2 ({"action", "payload", "error"}) of callback $1,
-- whose job still runs (locked by callback_lock.sql): applied when that
-- run parks the job (wait.sql). Returns the job's row as hooks see it.
UPDATE jobs_in AS j SET callback_early = $2::jsonb
 WHERE j.callback_id = $1::uuid
RETURNING actor_worker_job_json(j.id, '{}'::jsonb) AS row_json
