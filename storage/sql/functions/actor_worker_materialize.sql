-- Lane jobs whose run ends other than by completing (a failure, a snooze,
-- a park, a cancel): each becomes an ordinary running row of its batch
-- (off the lane, its attempt counted, batch_id set), so that the row
-- statements record the outcome as for any row-claimed job. p_batches[i]
-- is the lease of job p_ids[i]. Only batches of p_worker that no rescue
-- took back count, and only jobs still on the lane in that batch; returns
-- the ids changed (never one its batch's receipts already hold). A receipt
-- (done = false) records that they left the batch, which is then marked
-- finished if its receipts hold all its jobs. `j.id = ANY
-- (p_ids)` makes the generic plan find the jobs by id: joined on the lane
-- columns alone, it read the whole batch's range of the lane index for
-- each call (4 ms for one job of a batch of 2,000, the transactional
-- handlers' case, where every job is materialized on its own). PL/pgSQL,
-- not SQL: a SQL function plans its statement on every call (10 ms for
-- this one over the partitions of jobs and job_batches), PL/pgSQL once
-- per session.
--
-- Marking finished: counting what a batch's receipts hold
-- (actor_worker_batch_done) reads all of them, and a transactional run
-- adds one per job, so counting on every call cost a batch of n jobs
-- n^2/2 receipt reads (0.46 M instructions a call at n = 320, 1.9 M at
-- 2,000: more than the rest of the function). Receipts hold only jobs
-- their batch's claim handed out (an outcome names a job with the lease
-- it was handed out with), and the claim handed out its last job (to_id),
-- so only a batch whose last job a receipt holds can have all its jobs
-- held: the count runs only for a batch whose last job this call moved or an
-- earlier receipt holds (one probe of batch_receipts_batch_idx), about as
-- many times per batch as runs overlap at its end. It is a statement of
-- its own, run only then: as a CTE its UPDATE opened every partition of
-- job_batches on every call. It sees this call's receipts (so no `+ n`),
-- and any other outcome committed since the statement above: a batch
-- is marked only when receipts visible to it hold all its jobs, as
-- before; one both missed is marked by maintenance
-- (storage/sql/outcomes.sql:close_batches), as before.
CREATE OR REPLACE FUNCTION actor_worker_materialize(
  p_worker text, p_batches bigint[], p_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_ids   bigint[];  -- the jobs moved
  v_check bigint[];  -- their batches whose last job a receipt holds
BEGIN
  -- The locks first, in statements of their own: a transactional group
  -- holds its lane jobs locked without writing them
  -- (actor_worker_lock_lane_jobs) and completes them by a receipt at its
  -- commit (actor_worker_transactional_begin). Its lock only makes this
  -- wait; the statement below then reads the receipts with a snapshot
  -- taken after the wait, and finds that completion (read in one
  -- statement, the receipt check would have used a snapshot from before
  -- the wait, and moved a completed job). The rows are locked too, for
  -- any other writer of them.
  PERFORM actor_worker_lock_lane_jobs(p_ids);
  PERFORM 1 FROM jobs_in AS j
   WHERE j.id = ANY (p_ids) AND j.ready_xid <> '0'
   ORDER BY j.id
     FOR NO KEY UPDATE OF j;
  WITH live AS (
    SELECT b.* FROM actor_worker_live_batches(p_worker, p_batches) AS b
  ), moved AS (
    UPDATE jobs_in AS j
       SET ready_xid = '0', state = 'running', attempt = j.attempt + 1,
           batch_id = l.id
      FROM unnest(p_batches, p_ids) AS u(batch, id)
      JOIN live AS l ON l.id = u.batch
     WHERE j.id = ANY (p_ids) AND j.id = u.id
       AND j.state = 'available' AND j.ready_xid <> '0'
       AND j.queue = l.queue AND j.priority = l.priority
       AND (j.ready_xid, j.id) >= (l.first_xid, l.first_id)
       AND (j.ready_xid, j.id) <= (l.to_xid, l.to_id)
       AND pg_visible_in_snapshot(j.ready_xid, l.tick_hi)
       AND NOT pg_visible_in_snapshot(j.ready_xid, l.tick_lo)
       -- Not a job whose completion its batch already holds (a release
       -- after a completion whose commit got no reply).
       AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                        WHERE r.batch_id = l.id AND r.bucket = j.id >> 6
                          AND actor_worker_has_bit(r.mask, j.id))
    RETURNING j.id, l.id AS batch, l.to_id
  ), receipts AS (
    INSERT INTO batch_receipts (batch_id, done, bucket, mask)
    SELECT m.batch, false, m.id >> 6, bit_or(1::bigint << (m.id & 63)::integer)
      FROM moved AS m GROUP BY m.batch, m.id >> 6
  ), batches AS (
    SELECT m.batch, m.to_id, bool_or(m.id = m.to_id) AS last_moved
      FROM moved AS m GROUP BY m.batch, m.to_id
  )
  SELECT (SELECT array_agg(m.id) FROM moved AS m),
         (SELECT array_agg(b.batch) FROM batches AS b
           WHERE b.last_moved
              OR EXISTS (SELECT 1 FROM batch_receipts AS c
                          WHERE c.batch_id = b.batch AND c.bucket = b.to_id >> 6
                            AND actor_worker_has_bit(c.mask, b.to_id)))
    INTO v_ids, v_check;
  IF v_check IS NOT NULL THEN
    -- b.id = ANY, as in actor_worker_complete: joined by batch id alone,
    -- the generic plan walked every batch of the slot.
    UPDATE job_batches AS b SET finished_at = now()
     WHERE b.id = ANY (v_check) AND b.finished_at IS NULL
       AND actor_worker_batch_done(b.id) >= b.size;
  END IF;
  RETURN QUERY SELECT unnest(v_ids);
END
$$;
