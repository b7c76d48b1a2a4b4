-- Completions of lane jobs held by a transactional group's transaction
-- (actor_worker_transactional_begin, earlier in the same transaction):
-- receipts, and nothing written to the jobs' rows (unless p_delete:
-- completed_retention 0 deletes them at once). p_batches[i] is the lease
-- of job p_ids[i]. The begin checked every lease and still holds it (the
-- jobs' locks, and a shared advisory lock on each claim), so nothing is
-- checked again: this is actor_worker_complete less its checks, two plans
-- of eight partitions each where that one has six. Returns the ids
-- recorded.
--
-- A batch whose last job (to_id) a receipt holds, this call's or an
-- earlier one, is counted, and marked finished once its receipts hold all
-- its jobs (as in actor_worker_complete: two groups completing the last
-- jobs of one batch at once each see only their own receipts; the
-- maintenance's close_batches, or the worker's own take-back of claims it
-- no longer holds, marks such a batch).
CREATE OR REPLACE FUNCTION actor_worker_transactional_complete(
  p_worker text, p_batches bigint[], p_ids bigint[], p_delete boolean)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_check bigint[];  -- batches whose last job a receipt holds
BEGIN
  WITH batch AS (
    SELECT l.id, l.claimed_at, l.to_id
      FROM (SELECT DISTINCT x.id FROM unnest(p_batches) AS x(id)) AS v,
           LATERAL (SELECT b.id, b.claimed_at, b.to_id FROM job_batches AS b
                     WHERE b.id = v.id LIMIT 1) AS l
  ), receipts AS (
    INSERT INTO batch_receipts (batch_id, done, bucket, mask, worker, claimed_at)
    SELECT u.batch, true, u.id >> 6,
           bit_or(1::bigint << (u.id & 63)::integer), p_worker, min(b.claimed_at)
      FROM unnest(p_batches, p_ids) AS u(batch, id)
      JOIN batch AS b ON b.id = u.batch
     GROUP BY u.batch, u.id >> 6
  )
  SELECT array_agg(b.id) INTO v_check
    FROM batch AS b
   WHERE b.to_id = ANY (p_ids)
      OR EXISTS (SELECT 1 FROM batch_receipts AS c
                  WHERE c.batch_id = b.id AND c.bucket = b.to_id >> 6
                    AND actor_worker_has_bit(c.mask, b.to_id));
  IF v_check IS NOT NULL THEN
    UPDATE job_batches AS b SET finished_at = now()
     WHERE b.id = ANY (v_check) AND b.finished_at IS NULL
       AND actor_worker_batch_done(b.id) >= b.size;
  END IF;
  IF p_delete THEN
    DELETE FROM jobs_in AS j
     WHERE j.id = ANY (p_ids) AND j.ready_xid <> '0' AND j.state = 'available';
  END IF;
  RETURN QUERY SELECT DISTINCT u.id FROM unnest(p_ids) AS u(id);
END
$$;
