-- Completions of lane jobs: receipts, and nothing written to the jobs'
-- rows (unless p_delete: completed_retention 0 deletes them at once).
-- p_batches[i] is the lease of job p_ids[i]. Only batches of p_worker that
-- no rescue took back count, and only jobs no receipt of their batch holds
-- yet (a completion recorded twice counts once; a job that left the batch,
-- released or failed, stays out); returns the ids recorded. The batches are
-- locked against a rescue (actor_worker_live_batches).
--
-- A receipt row holds up to 64 jobs of one batch, as bits: the ids
-- bucket * 64 to bucket * 64 + 63 (batch_receipts), and the batch's worker
-- and claim time. The `jobs` view joins completed lane jobs to their
-- receipt by the bucket (a hash join for a scan, an index probe for one
-- id) and reads all it shows of them there; the bits make a receipt of 64
-- jobs 8 bytes. A batch whose receipts then hold all its jobs is marked
-- finished. The delete is a statement of its own, run only when asked: as
-- a CTE it opened every partition of jobs on every completion.
CREATE OR REPLACE FUNCTION actor_worker_complete(
  p_worker text, p_batches bigint[], p_ids bigint[], p_delete boolean)
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_ids bigint[];  -- the jobs recorded
BEGIN
  WITH live AS (
    SELECT b.id, b.to_id, (SELECT x.claimed_at FROM job_batches AS x
                            WHERE x.id = b.id LIMIT 1) AS claimed_at
      FROM actor_worker_live_batches(p_worker, p_batches) AS b
  ), asked AS (
    SELECT u.batch, u.id >> 6 AS bucket,
           bit_or(1::bigint << (u.id & 63)::integer) AS mask
      FROM unnest(p_batches, p_ids) AS u(batch, id)
     WHERE u.batch IN (SELECT live.id FROM live)
     GROUP BY u.batch, u.id >> 6
  ), fresh AS (
    -- Less the bits a receipt of the batch already holds: one probe of
    -- batch_receipts_batch_idx per (batch, bucket).
    SELECT a.batch, a.bucket,
           a.mask & ~coalesce((SELECT bit_or(r.mask) FROM batch_receipts AS r
                                WHERE r.batch_id = a.batch
                                  AND r.bucket = a.bucket), 0) AS mask
      FROM asked AS a
  ), receipts AS (
    INSERT INTO batch_receipts (batch_id, done, bucket, mask, worker, claimed_at)
    SELECT f.batch, true, f.bucket, f.mask, p_worker, l.claimed_at
      FROM fresh AS f JOIN live AS l ON l.id = f.batch
     WHERE f.mask <> 0
    RETURNING batch_id, bucket, mask
  ), finished AS (
    -- b.id = ANY (p_batches) gives each slot's id index the few batches
    -- to look up: joined by batch id alone, the generic plan walked every
    -- batch of the slot. Counting a batch's receipts reads all of them,
    -- so it runs only for a batch whose last job (to_id: the claim handed
    -- it out, and only what a claim handed out gets a receipt) a receipt
    -- holds, this call's or an earlier one: a batch completed a few jobs
    -- at a time (transactional groups) no longer counts on every call.
    UPDATE job_batches AS b SET finished_at = now()
      FROM (SELECT r.batch_id, sum(actor_worker_bit_count(r.mask)) AS n
              FROM receipts AS r GROUP BY r.batch_id) AS r
      JOIN live AS l ON l.id = r.batch_id
     WHERE b.id = ANY (p_batches) AND b.id = r.batch_id AND b.finished_at IS NULL
       AND CASE WHEN EXISTS (SELECT 1 FROM receipts AS x
                              WHERE x.batch_id = l.id AND x.bucket = l.to_id >> 6
                                AND actor_worker_has_bit(x.mask, l.to_id))
                  OR EXISTS (SELECT 1 FROM batch_receipts AS c
                              WHERE c.batch_id = l.id AND c.bucket = l.to_id >> 6
                                AND actor_worker_has_bit(c.mask, l.to_id))
                THEN actor_worker_batch_done(b.id) + r.n >= b.size
                ELSE false END
  )
  SELECT array_agg(x.id) INTO v_ids
    FROM receipts AS r, LATERAL actor_worker_bit_ids(r.bucket, r.mask) AS x(id);
  IF p_delete AND v_ids IS NOT NULL THEN
    DELETE FROM jobs_in AS j
     WHERE j.id = ANY (v_ids) AND j.ready_xid <> '0' AND j.state = 'available';
  END IF;
  RETURN QUERY SELECT unnest(v_ids);
END
$$;
