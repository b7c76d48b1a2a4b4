-- Rescue, part one: expired lane batches hand their unfinished jobs over as
-- running rows (see actor_worker_expire_batches).
SELECT actor_worker_expire_batches($1, $2)
