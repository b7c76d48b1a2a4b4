-- The leases a transactional group's transaction (job_store::transact)
-- holds on its lane jobs: job p_ids[i] is still on its lane in batch
-- p_batches[i] of worker p_worker (the batch's range, no receipt for it:
-- the predicate actor_worker_materialize moves by). Returns the ids held.
-- The jobs are locked first (actor_worker_lock_lane_jobs: no row is
-- written) and read after, in a statement of its own, so a writer that
-- moved one of them before the lock was granted is seen. A completion
-- becomes a receipt at the commit, as on the batched path (any other
-- outcome materializes the job in the same transaction). Every other
-- writer of these jobs takes the same locks and looks afresh after the
-- wait (actor_worker_materialize), so it finds the receipt, or the job
-- still on its lane if the transaction rolled back. The batches are held
-- FOR KEY SHARE (actor_worker_live_batches): a rescue passes them by.
CREATE OR REPLACE FUNCTION actor_worker_transactional_lease(
  p_worker text, p_batches bigint[], p_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  PERFORM actor_worker_lock_lane_jobs(p_ids);
  RETURN QUERY
  SELECT j.id
    FROM actor_worker_live_batches(p_worker, p_batches) AS l
    JOIN unnest(p_batches, p_ids) AS u(batch, id) ON u.batch = l.id
    JOIN jobs_in AS j ON j.id = u.id
   WHERE j.id = ANY (p_ids)
     AND j.state = 'available' AND j.ready_xid <> '0'
     AND j.queue = l.queue AND j.priority = l.priority
     AND (j.ready_xid, j.id) >= (l.first_xid, l.first_id)
     AND (j.ready_xid, j.id) <= (l.to_xid, l.to_id)
     AND pg_visible_in_snapshot(j.ready_xid, l.tick_hi)
     AND NOT pg_visible_in_snapshot(j.ready_xid, l.tick_lo)
     AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                      WHERE r.batch_id = l.id AND r.bucket = j.id >> 6
                        AND actor_worker_has_bit(r.mask, j.id))
   ORDER BY j.id;
END
$$;
