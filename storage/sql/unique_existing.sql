-- The job that holds unique key $1 now.
SELECT id FROM jobs_unique
 WHERE unique_key = $1 AND actor_worker_unique_active(state, unique_states)
