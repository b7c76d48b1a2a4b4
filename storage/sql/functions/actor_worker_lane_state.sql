-- What a job on a lane is, for jobs_live: its row says 'available' while
-- its claim and completion live in job_batches and batch_receipts. Returns
-- no row for a job that is not on a lane or not claimed yet (its row is
-- right); otherwise 'running' (its batch is open) or 'completed' (a
-- receipt holds it), with its batch's worker and claim time and the
-- receipt's time. A lane job handed out whose batch is gone (retention
-- took it) completed long ago.
CREATE OR REPLACE FUNCTION actor_worker_lane_state(
  p_queue text, p_priority integer, p_xid xid8, p_id bigint, p_state text)
RETURNS TABLE (state text, locked_by text, locked_at timestamptz,
               finalized_at timestamptz)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
  b  record;
  v_at timestamptz;
BEGIN
  IF p_xid = '0' OR p_state <> 'available' THEN
    RETURN;
  END IF;
  SELECT x.id, x.worker, x.claimed_at, x.rescued_at INTO b
    FROM job_batches AS x
   WHERE x.queue = p_queue AND x.priority = p_priority AND x.on_lane
     AND (x.to_xid, x.to_id) >= (p_xid, p_id)
     AND (x.first_xid, x.first_id) <= (p_xid, p_id)
     AND pg_visible_in_snapshot(p_xid, x.tick_hi)
     AND NOT pg_visible_in_snapshot(p_xid, x.tick_lo)
   ORDER BY x.to_xid, x.to_id
   LIMIT 1;
  IF FOUND THEN
    SELECT r.at INTO v_at FROM batch_receipts AS r
     WHERE r.batch_id = b.id AND r.done AND p_id = ANY (r.ids) LIMIT 1;
    IF FOUND THEN
      RETURN QUERY SELECT 'completed'::text, b.worker, b.claimed_at, v_at;
    ELSIF b.rescued_at IS NULL THEN
      RETURN QUERY SELECT 'running'::text, b.worker, b.claimed_at,
                          NULL::timestamptz;
    END IF;
    RETURN;
  END IF;
  -- Its lane's position passed it: handed out.
  PERFORM 1 FROM actor_worker_lane_head(p_queue, p_priority) AS p
   WHERE actor_worker_handed_out(p_xid, p_id, p.tick_lo, p.tick_hi, p.to_xid,
                                 p.to_id);
  IF FOUND THEN
    RETURN QUERY SELECT 'completed'::text, NULL::text, NULL::timestamptz,
                        NULL::timestamptz;
  END IF;
END
$$;
