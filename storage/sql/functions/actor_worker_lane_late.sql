-- The transactions each lane's position saw running as its tick ended
-- (actor_worker_lane_positions' `late`), one row each: their jobs on the
-- lane are not handed out yet, whatever their place in the lane's order.
-- Usually none. Declared to return one row, so that the `jobs` view reads
-- their jobs by a probe of the lane index per transaction: as an array of
-- unknown length, the planner took it for ten per lane and hashed the
-- whole table instead.
CREATE OR REPLACE FUNCTION actor_worker_lane_late()
RETURNS TABLE (queue text, priority integer, xid xid8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
ROWS 1
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT p.queue, p.priority, x.xid
    FROM actor_worker_lane_positions() AS p, unnest(p.late) AS x(xid);
END
$$;
