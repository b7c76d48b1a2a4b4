-- A lane's position: its newest batch (`batch_id`), that batch's tick (two
-- snapshots), the last job taken in it, and whether that was the tick's
-- last job (`tick_done`: the next claim starts a new tick at once); no row
-- before the lane's first claim. A lane job was handed out when
-- actor_worker_handed_out() says so for this position.
-- The priority is written as a range and ordered by, so that only
-- job_batches_lane_idx gives the order: given as an equality it drops out
-- of the ORDER BY, and a generic plan may walk a slot's id index through
-- other lanes' batches (when its statistics saw one busy queue): 57,000
-- batches, 23 ms a claim, measured.
CREATE OR REPLACE FUNCTION actor_worker_lane_head(p_queue text,
                                                  p_priority integer)
RETURNS TABLE (tick_lo pg_snapshot, tick_hi pg_snapshot, to_xid xid8,
               to_id bigint, tick_done boolean, batch_id bigint)
LANGUAGE sql STABLE
AS $$
  SELECT b.tick_lo, b.tick_hi, b.to_xid, b.to_id, b.tick_done, b.id
    FROM job_batches AS b
   WHERE b.queue = p_queue AND b.priority >= p_priority
     AND b.priority <= p_priority AND b.on_lane
   ORDER BY b.priority DESC, b.id DESC
   LIMIT 1
$$;
