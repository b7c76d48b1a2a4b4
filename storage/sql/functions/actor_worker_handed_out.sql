-- Whether the lane job (p_xid, p_id) is behind its lane's position (p_lo,
-- p_hi, p_to_xid, p_to_id; actor_worker_lane_head): an earlier tick
-- took it (p_lo sees its transaction), or the current one did up to the
-- position. A NULL position (no claim yet) hands out nothing. A job not
-- handed out has its ready_xid in p_lo's running list or at or past p_lo's
-- xmax: the bounds to read a lane's waiting jobs by.
CREATE OR REPLACE FUNCTION actor_worker_handed_out(
  p_xid xid8, p_id bigint, p_lo pg_snapshot, p_hi pg_snapshot,
  p_to_xid xid8, p_to_id bigint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT p_lo IS NOT NULL
         AND (pg_visible_in_snapshot(p_xid, p_lo)
              OR (pg_visible_in_snapshot(p_xid, p_hi)
                  AND (p_xid, p_id) <= (p_to_xid, p_to_id)))
$$;
