-- Whether a unique job in `state` holds its key (its unique_states name
-- the state): the predicate of jobs_unique_key_idx.
CREATE OR REPLACE FUNCTION actor_worker_unique_active(state text, states text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT state = ANY (states) $$;
