-- Takes claim p_batch back from its worker (a worker gone, or a live worker
-- that does not hold the claim: one whose commit it never heard of, the
-- connection broken as it committed): the batch's unfinished lane jobs
-- become running rows of it, and it is marked rescued, which turns late
-- outcomes of its runs into stale ones. actor_worker_rescue then charges
-- those of its running rows whose handler started and gives the others
-- back uncharged. The caller holds the batch FOR UPDATE. Returns false
-- when there was nothing to take (its jobs all finished: it is then marked
-- finished). (It takes an id, not the row: functions are installed before
-- the tables they read.)
CREATE OR REPLACE FUNCTION actor_worker_take_back(p_batch bigint)
RETURNS boolean
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  b          record;
  v_finished timestamptz;
BEGIN
  SELECT * INTO b FROM job_batches AS x WHERE x.id = p_batch;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  -- Nothing to take: the batch is marked finished, so that no heartbeat or
  -- rescue looks at it again (job_batches_unfinished_idx). A row batch is
  -- finished only here: its outcomes do not mark it (a write per outcome),
  -- and its rows, once none runs, never run under it again (a claim gives
  -- them a new batch).
  v_finished := CASE
    WHEN b.on_lane THEN actor_worker_batch_finished_at(b.id, b.size)
    WHEN NOT EXISTS (SELECT 1 FROM jobs_in AS r
                      WHERE r.batch_id = b.id AND r.state = 'running') THEN now()
  END;
  IF v_finished IS NOT NULL THEN
    UPDATE job_batches AS x SET finished_at = v_finished WHERE x.id = b.id;
    RETURN false;
  END IF;
  IF b.on_lane THEN
    UPDATE jobs_in AS r
       SET ready_xid = '0', state = 'running', attempt = r.attempt + 1,
           batch_id = b.id
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid <> '0' AND r.state = 'available'
       AND (r.ready_xid, r.id) >= (b.first_xid, b.first_id)
       AND (r.ready_xid, r.id) <= (b.to_xid, b.to_id)
       AND pg_visible_in_snapshot(r.ready_xid, b.tick_hi)
       AND NOT pg_visible_in_snapshot(r.ready_xid, b.tick_lo)
       AND NOT EXISTS (SELECT 1 FROM batch_receipts AS c
                        WHERE c.batch_id = b.id AND c.bucket = r.id >> 6
                          AND actor_worker_has_bit(c.mask, r.id));
  END IF;
  UPDATE job_batches AS x SET rescued_at = now() WHERE x.id = b.id;
  RETURN true;
END
$$;
