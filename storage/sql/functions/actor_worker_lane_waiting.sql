-- The jobs of lane (queue, priority) not handed out yet, in ring slots
-- p_slot_from to p_slot_to, given the lane's position (its newest batch:
-- tick p_lo..p_hi, last job p_to_xid, p_to_id; all NULL for a lane never
-- claimed): the rest of the position's tick (actor_worker_lane_jobs, the
-- claim's own reader), and what the tick's upper snapshot does not see
-- (committed since, or running then). A lane with no position: all of it.
-- Every part is a range of the lane index bounded by the live work. Read
-- from the position's lower snapshot instead, a lane whose last tick was
-- used up read its whole finished history: the lower snapshot stays put
-- while a lane is idle. Read by the queue samples
-- (storage/sql/samples.sql:queue_samples) and the ring (actor_worker_recycle).
CREATE OR REPLACE FUNCTION actor_worker_lane_waiting(
  p_queue text, p_priority integer, p_lo pg_snapshot, p_hi pg_snapshot,
  p_to_xid xid8, p_to_id bigint, p_slot_from smallint, p_slot_to smallint)
RETURNS TABLE (id bigint, kind text, run_at timestamptz)
LANGUAGE sql STABLE
AS $$
  SELECT t.id, t.kind, t.run_at
    FROM actor_worker_lane_jobs(p_queue, p_priority, p_lo, p_hi, p_to_xid,
                                p_to_id, 2147483647, p_slot_from, p_slot_to) AS t
   WHERE p_hi IS NOT NULL
  UNION ALL
  SELECT j.id, j.kind, j.run_at FROM jobs_in AS j
   WHERE j.queue = p_queue AND j.priority = p_priority AND j.ready_xid <> '0'
     AND j.slot >= p_slot_from AND j.slot <= p_slot_to
     AND j.ready_xid >= coalesce(pg_snapshot_xmax(p_hi), '1')
  UNION ALL
  SELECT j.id, j.kind, j.run_at FROM jobs_in AS j
   WHERE j.queue = p_queue AND j.priority = p_priority AND j.ready_xid <> '0'
     AND j.slot >= p_slot_from AND j.slot <= p_slot_to
     AND j.ready_xid = ANY (ARRAY(SELECT pg_snapshot_xip(p_hi)))
$$;
