-- The lowest transaction id in an open lane batch (its first job's), or
-- the largest xid8 when no lane batch is open. The `jobs` view says its
-- running lane jobs have ready_xid >= this (each is in an open batch), a
-- bound the planner can estimate, as actor_worker_lane_floor explains:
-- without it, every open batch was a ninth of the table to the planner,
-- and counting the running jobs paid for JIT compilation of the plan.
-- PL/pgSQL: a SQL function is planned on every call (0.6 ms here, in
-- every read of one job by id).
CREATE OR REPLACE FUNCTION actor_worker_open_floor()
RETURNS xid8
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  v_floor xid8;
BEGIN
  SELECT min(b.first_xid) INTO v_floor
    FROM job_batches AS b
   WHERE b.on_lane AND b.finished_at IS NULL AND b.rescued_at IS NULL;
  RETURN coalesce(v_floor, '18446744073709551615');
END
$$;
