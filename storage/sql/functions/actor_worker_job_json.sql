-- A job's row as hooks see it (messages/event.hpp): the public columns of
-- jobs as a JSON object (keys = column names, as jobs has them), with
-- `p_live` laid over it: what the statement calling this is changing
-- (state, attempt, locked_by, ...), which the row read here does not show
-- yet. Only kinds that hooks or follow-ups observe pay for it.
CREATE OR REPLACE FUNCTION actor_worker_job_json(p_id bigint, p_live jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
  SELECT (to_jsonb(j) - 'ready_xid' - 'batch_id' - 'slot' - 'callback_lease'
          - 'callback_early'
          || jsonb_build_object('locked_by', NULL, 'locked_at', NULL)
          || p_live)::text
    FROM jobs_in AS j
   WHERE j.id = p_id
   LIMIT 1
$$;
