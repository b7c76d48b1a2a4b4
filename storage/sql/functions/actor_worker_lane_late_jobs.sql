-- The lane jobs of the transactions each lane's position saw running as
-- its tick ended (actor_worker_lane_late): not handed out yet, whatever
-- their place in the lane's order. Usually none, then this costs one look
-- at the positions. A function of its own, declared to return one row, so
-- that the `jobs` view's plan counts them as the few they are: as a join
-- the planner took each such transaction for the table's average (a
-- hundred thousand jobs in a bulk-loaded table), which priced every scan
-- of `jobs` past the cost at which PostgreSQL compiles a plan with JIT
-- (about 0.7 s of a 1.1 s scan of a million jobs). Each transaction's jobs
-- are a probe of the lane index.
CREATE OR REPLACE FUNCTION actor_worker_lane_late_jobs()
RETURNS TABLE (id bigint, kind text, queue text, args jsonb, priority integer,
               run_at timestamptz, created_at timestamptz, attempt integer,
               error_count integer, max_attempts integer,
               last_error_message text, last_failed_at timestamptz,
               metadata jsonb, tags text[], deadline_ms bigint,
               callback_id uuid, callback_timeout_at timestamptz,
               callback_result jsonb, ordering_key text, unique_key text,
               unique_states text[])
LANGUAGE plpgsql STABLE PARALLEL SAFE
ROWS 1
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT j.id, j.kind, j.queue, j.args, j.priority, j.run_at, j.created_at,
         j.attempt, j.error_count, j.max_attempts, j.last_error_message,
         j.last_failed_at, j.metadata, j.tags, j.deadline_ms, j.callback_id,
         j.callback_timeout_at, j.callback_result, j.ordering_key,
         j.unique_key, j.unique_states
    FROM actor_worker_lane_late() AS l
   CROSS JOIN LATERAL (
     SELECT x.* FROM jobs_in AS x
      WHERE x.queue = l.queue AND x.priority = l.priority
        AND x.ready_xid = l.xid AND x.ready_xid <> '0'
        AND x.unique_key IS NULL) AS j;
END
$$;
