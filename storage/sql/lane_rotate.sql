-- Starts the next lane generation (its partition) once the current one is
-- older than $1 seconds; NULL when it was not due (migrations/019).
SELECT actor_worker_rotate_lanes($1) AS gen
