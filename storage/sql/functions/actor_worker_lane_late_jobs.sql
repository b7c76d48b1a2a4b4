-- The lane jobs of the transactions each lane's position saw running as
-- its tick ended (its `late`, actor_worker_lane_positions) that come
-- before the position in the lane's order: not handed out yet, though the
-- view's range past the position does not reach them (it holds those that
-- come after). Usually none, then this costs one look at the positions. A function of its own, declared to return one row, so
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
DECLARE
  p record;
BEGIN
  -- A loop: each transaction's jobs by a probe of the lane index (as a join
  -- the planner hashed a scan of the whole table against them).
  FOR p IN SELECT l.queue, l.priority, l.to_xid, l.to_id, x.xid
             FROM actor_worker_lane_positions() AS l, unnest(l.late) AS x(xid) LOOP
    RETURN QUERY
    SELECT j.id, j.kind, j.queue, j.args, j.priority, j.run_at, j.created_at,
           j.attempt, j.error_count, j.max_attempts, j.last_error_message,
           j.last_failed_at, j.metadata, j.tags, j.deadline_ms, j.callback_id,
           j.callback_timeout_at, j.callback_result, j.ordering_key,
           j.unique_key, j.unique_states
      FROM jobs_in AS j
     WHERE j.queue = p.queue AND j.priority = p.priority
       AND j.ready_xid = p.xid AND j.ready_xid <> '0'
       AND (j.ready_xid, j.id) <= (p.to_xid, p.to_id)
       AND j.unique_key IS NULL;
  END LOOP;
END
$$;
