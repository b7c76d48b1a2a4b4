-- 003_outcomes: external callbacks, unique jobs and ordering keys.

ALTER TABLE jobs
  -- Set when a handler parks the job waiting for an external callback.
  -- Random (gen_random_uuid), so unguessable; resolution looks it up.
  ADD COLUMN callback_id uuid,
  ADD COLUMN callback_timeout_at timestamptz,
  -- The payload the callback was resolved with.
  ADD COLUMN callback_result jsonb,
  -- Jobs sharing a key run one at a time, in id (enqueue) order.
  ADD COLUMN ordering_key text,
  -- Unique jobs: a digest of kind and args (and queue, period bucket) and
  -- the states in which it must be unique.
  ADD COLUMN unique_key text,
  ADD COLUMN unique_states text[];

CREATE UNIQUE INDEX jobs_callback_idx ON jobs (callback_id)
  WHERE callback_id IS NOT NULL;
-- Expired callbacks are rescued by the lease keeper.
CREATE INDEX jobs_waiting_idx ON jobs (callback_timeout_at)
  WHERE state = 'waiting_external';

-- The claim checks that no earlier job of the same key is unfinished.
CREATE INDEX jobs_ordering_idx ON jobs (ordering_key, id)
  WHERE ordering_key IS NOT NULL
    AND state IN ('scheduled', 'available', 'running', 'waiting_external');

-- At most one job per unique_key among the rows whose state is one of their
-- unique_states: concurrent producers of the same unique job cannot both
-- insert it. A job that moves to another state leaves the index.
CREATE FUNCTION actor_worker_unique_active(state text, states text[])
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT state = ANY(states) $$;

CREATE UNIQUE INDEX jobs_unique_idx ON jobs (unique_key)
  WHERE unique_key IS NOT NULL
    AND actor_worker_unique_active(state, unique_states);
