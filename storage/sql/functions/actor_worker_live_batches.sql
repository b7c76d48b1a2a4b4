-- The lane batches among p_batches (leases, repeats allowed) that worker
-- p_worker claimed and no rescue took back, each once, locked FOR KEY
-- SHARE: an outcome holds a rescue of the same batch (FOR UPDATE) off
-- until it commits, and waits for a rescue under way. Used by every
-- outcome of lane jobs (actor_worker_complete, actor_worker_materialize).
--
-- Each batch is looked up by its id on its own (a LATERAL subquery with
-- LIMIT, which the planner cannot flatten into a join), so every index it
-- may pick has the id in its condition. Written as one `b.id = ANY
-- (p_batches) AND b.worker = p_worker`, the generic plan, made while the
-- current ring slot was still empty, read job_batches_worker_idx by the
-- worker alone and filtered the ids: every completion walked all of the
-- worker's batches in the slot (3,220 of them 20 s into a run of
-- one-job claims, 4.9 of a 7 ms completion, and growing for as long as
-- the slot stays current: hours).
CREATE OR REPLACE FUNCTION actor_worker_live_batches(
  p_worker text, p_batches bigint[])
RETURNS TABLE (id bigint, queue text, priority integer,
               tick_lo pg_snapshot, tick_hi pg_snapshot,
               first_xid xid8, first_id bigint, to_xid xid8, to_id bigint)
LANGUAGE plpgsql VOLATILE
ROWS 4
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT l.id, l.queue, l.priority, l.tick_lo, l.tick_hi,
         l.first_xid, l.first_id, l.to_xid, l.to_id
    FROM (SELECT DISTINCT x.id FROM unnest(p_batches) AS x(id)) AS u,
         LATERAL (SELECT b.id, b.queue, b.priority, b.tick_lo, b.tick_hi,
                         b.first_xid, b.first_id, b.to_xid, b.to_id
                    FROM job_batches AS b
                   WHERE b.id = u.id AND b.worker = p_worker AND b.on_lane
                     AND b.rescued_at IS NULL
                   LIMIT 1
                     FOR KEY SHARE) AS l;
END
$$;
