-- Every lane that has jobs, with its position (actor_worker_lane_head;
-- docs/storage.md, concept 3), as the `jobs` view reads them: the tick
-- (two snapshots), the last job handed out in it, and `late`, the
-- transactions the tick's upper snapshot saw running (their jobs came
-- later, whatever their ids). A lane never claimed gets a position before
-- all of its jobs. A lane job was handed out when actor_worker_handed_out
-- says so for this position; the view reads those not handed out as a
-- range of the lane index per lane (past the position, its lower snapshot
-- not seeing them) and the jobs of `late` before the position
-- (actor_worker_lane_late_jobs). `lo_xmax`, the lower snapshot's xmax:
-- no transaction from it on is visible in it, so the view tests the
-- snapshot only for the few jobs below it (a call per job it saves).
--
-- PL/pgSQL, and declared to return one row: the planner then drives each
-- lane's ranges of the lane index from this result (a lane may hold
-- millions of finished jobs), and still reads one job by its id when a
-- query names one. As an inlined SQL function, its recursive scan gave the
-- planner no estimate and it chose to hash the whole table.
CREATE OR REPLACE FUNCTION actor_worker_lane_positions()
RETURNS TABLE (queue text, priority integer, tick_lo pg_snapshot,
               tick_hi pg_snapshot, to_xid xid8, to_id bigint, late xid8[],
               lo_xmax xid8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
ROWS 1
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT l.queue, l.priority, coalesce(h.tick_lo, '1:1:'),
         coalesce(h.tick_hi, '1:1:'), coalesce(h.to_xid, '0'),
         coalesce(h.to_id, -9223372036854775808),
         coalesce(ARRAY(SELECT pg_snapshot_xip(h.tick_hi)), '{}'),
         coalesce(pg_snapshot_xmax(h.tick_lo), '1')
    FROM actor_worker_lanes() AS l
    LEFT JOIN LATERAL actor_worker_lane_head(l.queue, l.priority) AS h ON true;
END
$$;
