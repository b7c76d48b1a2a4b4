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
CREATE OR REPLACE FUNCTION actor_worker_materialize(
  p_worker text, p_batches bigint[], p_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
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
    RETURNING j.id, l.id AS batch
  ), receipts AS (
    INSERT INTO batch_receipts (batch_id, done, bucket, mask)
    SELECT m.batch, false, m.id >> 6, bit_or(1::bigint << (m.id & 63)::integer)
      FROM moved AS m GROUP BY m.batch, m.id >> 6
    RETURNING batch_id, mask
  ), finished AS (
    -- b.id = ANY (p_batches), as in actor_worker_complete: joined by
    -- batch id alone, the generic plan walked every batch of the slot.
    UPDATE job_batches AS b SET finished_at = now()
      FROM (SELECT r.batch_id, sum(actor_worker_bit_count(r.mask)) AS n
              FROM receipts AS r GROUP BY r.batch_id) AS r
     WHERE b.id = ANY (p_batches) AND b.id = r.batch_id AND b.finished_at IS NULL
       AND actor_worker_batch_done(b.id) + r.n >= b.size
  )
  SELECT m.id FROM moved AS m;
END
$$;
