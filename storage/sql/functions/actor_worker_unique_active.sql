-- Whether a unique job in `state` holds its key: its unique_states name
-- the state, or, when it has none (a plain INSERT that set only
-- unique_key), the default states the enqueue API uses (scheduled,
-- available, running, waiting_external, completed). The predicate of
-- jobs_unique_key_idx (migration 010 rebuilt it when NULL came to mean the
-- defaults).
CREATE OR REPLACE FUNCTION actor_worker_unique_active(state text, states text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT state = ANY (coalesce(states, '{scheduled,available,running,waiting_external,completed}'))
$$;
