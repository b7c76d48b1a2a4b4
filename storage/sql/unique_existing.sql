SELECT id FROM job_rows
 WHERE unique_key = $1 AND actor_worker_unique_active(state, unique_states)
