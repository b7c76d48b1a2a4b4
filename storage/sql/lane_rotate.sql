-- One step of the lane rotation (migrations/019, 021): starts a pending
-- generation, or adds the next one, pending, once the current one is older
-- than $1 seconds. Returns the generation it started, else NULL.
SELECT actor_worker_rotate_lanes($1) AS gen
