-- The lowest transaction id of a lane job past its lane's position (what
-- the view's range per lane reads; not the few of
-- actor_worker_lane_late_jobs), or the largest xid8 when there is none:
-- the first job past each lane's position, one probe of the lane index per
-- lane. The `jobs` view says its waiting lane jobs have
-- ready_xid >= this, which holds (every one is past its lane's position)
-- and which the planner can estimate: it calls a stable function while it
-- plans and reads the answer against the column's histogram. Without it,
-- a range whose bounds come from another table is a third of the table to
-- the planner, and it scanned a million finished jobs to find the waiting
-- ones.
CREATE OR REPLACE FUNCTION actor_worker_lane_floor()
RETURNS xid8
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  v_floor xid8;
BEGIN
  SELECT min(f.xid) INTO v_floor
    FROM actor_worker_lane_positions() AS p,
         LATERAL (SELECT j.ready_xid AS xid FROM jobs_in AS j
                   WHERE j.queue = p.queue AND j.priority = p.priority
                     AND j.ready_xid <> '0' AND j.unique_key IS NULL
                     AND (j.ready_xid, j.id) > (p.to_xid, p.to_id)
                   ORDER BY j.ready_xid, j.id
                   LIMIT 1) AS f;
  RETURN coalesce(v_floor, '18446744073709551615');
END
$$;
