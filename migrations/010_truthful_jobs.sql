-- 010: `jobs` tells the truth. The table applications write to becomes
-- jobs_in; `jobs` becomes the view of every job with its live state, the
-- relation to read (docs/sql.md). A lane job's row is not written while it
-- is claimed and completed (that is where the speed comes from), so the
-- view derives those states from the lanes' positions, the open batches
-- and the receipts, branch by branch, each with a constant state and an
-- index of its own (docs/storage.md, "Reading").

-- 1. The table is jobs_in. Its partitions, indexes, identity sequence
-- (jobs_id_seq) and insert trigger keep their names.
ALTER TABLE jobs RENAME TO jobs_in;

-- 2. Receipts hold their jobs as bits: one row per batch, outcome commit
-- and bucket of 64 ids (the ids bucket * 64 to bucket * 64 + 63), so that
-- the view joins a completed lane job to its receipt by `id >> 6`: a hash
-- join for a scan, an index probe for one id.
-- A completion's receipt also says who completed the jobs and when they
-- were claimed (the batch's worker and claim time: the view's locked_by
-- and locked_at of a completed lane job, without a look at job_batches).
ALTER TABLE batch_receipts ADD COLUMN bucket bigint, ADD COLUMN mask bigint,
  ADD COLUMN worker text, ADD COLUMN claimed_at timestamptz,
  ALTER COLUMN ids DROP NOT NULL;
INSERT INTO batch_receipts (batch_id, slot, done, bucket, mask, at, worker,
                            claimed_at)
SELECT r.batch_id, r.slot, r.done, x.id >> 6,
       bit_or(1::bigint << (x.id & 63)::integer), r.at,
       (SELECT b.worker FROM job_batches AS b WHERE b.id = r.batch_id LIMIT 1),
       (SELECT b.claimed_at FROM job_batches AS b WHERE b.id = r.batch_id LIMIT 1)
  FROM batch_receipts AS r, unnest(r.ids) AS x(id)
 WHERE r.ids IS NOT NULL
 GROUP BY r.batch_id, r.slot, r.done, r.at, x.id >> 6;
DELETE FROM batch_receipts WHERE ids IS NOT NULL;
ALTER TABLE batch_receipts DROP COLUMN ids,
  ALTER COLUMN bucket SET NOT NULL, ALTER COLUMN mask SET NOT NULL;
DROP INDEX batch_receipts_batch_idx;
-- A batch's receipts, by bucket: what an outcome checks before it records
-- a job (each job once), and what counts a batch's finished jobs.
CREATE INDEX batch_receipts_batch_idx ON batch_receipts (batch_id, bucket);
-- The completions of a bucket of ids: one job's receipt, by its id.
CREATE INDEX batch_receipts_bucket_idx ON batch_receipts (bucket) WHERE done;

-- 3. Jobs off the lanes by state, in id order: every row the view takes
-- as its row says (the finished rows' lists too, which
-- jobs_finished_idx served).
DROP INDEX jobs_finished_idx;
CREATE INDEX jobs_rows_idx ON jobs_in (state, id) WHERE ready_xid = '0';

-- 4. A unique key without unique states holds its key in the default
-- states (actor_worker_unique_active): never silently a duplicate. Rows
-- written before, which held no key, keep holding none.
UPDATE jobs_unique SET unique_states = '{}' WHERE unique_states IS NULL;
REINDEX INDEX jobs_unique_key_idx;

-- 5. The view. jobs_live stays, as another name of it.
-- (A database migrated before 010 has the view jobs_live of 001 and its function.)
DROP VIEW IF EXISTS jobs_live;
DROP FUNCTION IF EXISTS actor_worker_lane_state(text, integer, xid8, bigint, text);
CREATE VIEW jobs AS
-- Off the lanes, waiting to run: 'scheduled' until run_at, then
-- 'available' (jobs_due_idx).
SELECT j.id, j.kind, j.queue, j.args,
       CASE WHEN j.run_at > now() THEN 'scheduled' ELSE 'available' END AS state,
       j.priority, j.run_at, j.created_at, j.attempt, j.error_count,
       j.max_attempts, j.last_error_message, j.last_failed_at,
       NULL::text AS locked_by, NULL::timestamptz AS locked_at,
       j.finalized_at, j.metadata, j.tags, j.deadline_ms, j.callback_id,
       j.callback_timeout_at, j.callback_result, j.ordering_key,
       j.unique_key, j.unique_states
  FROM jobs_in AS j
 WHERE j.ready_xid = '0' AND j.state IN ('available', 'scheduled')
UNION ALL
-- Off the lanes, running, waiting for a callback, or finished: as the row
-- says, held (or last held) by the claim batch_id names (jobs_rows_idx,
-- jobs_running_idx, jobs_waiting_idx). The claim is looked up only when a
-- query reads locked_by or locked_at: the aggregate makes the lateral
-- join one row per job, which lets the planner leave it out, and a
-- Memoize node looks each batch up once.
SELECT j.id, j.kind, j.queue, j.args, j.state, j.priority, j.run_at,
       j.created_at, j.attempt, j.error_count, j.max_attempts,
       j.last_error_message, j.last_failed_at, b.worker, b.claimed_at,
       j.finalized_at, j.metadata, j.tags, j.deadline_ms, j.callback_id,
       j.callback_timeout_at, j.callback_result, j.ordering_key,
       j.unique_key, j.unique_states
  FROM jobs_in AS j
  LEFT JOIN LATERAL (SELECT max(x.worker) AS worker,
                           max(x.claimed_at) AS claimed_at
                      FROM job_batches AS x WHERE x.id = j.batch_id) AS b ON true
 WHERE j.ready_xid = '0'
   AND j.state IN ('running', 'waiting_external', 'completed', 'cancelled')
UNION ALL
-- On a lane, past its position: not handed out yet (a range of the lane
-- index per lane; actor_worker_lane_floor says why it bounds them too).
SELECT j.id, j.kind, j.queue, j.args, 'available'::text, j.priority, j.run_at,
       j.created_at, j.attempt, j.error_count, j.max_attempts,
       j.last_error_message, j.last_failed_at, NULL::text, NULL::timestamptz,
       NULL::timestamptz, j.metadata,
       j.tags, j.deadline_ms, j.callback_id, j.callback_timeout_at,
       j.callback_result, j.ordering_key, j.unique_key, j.unique_states
  FROM actor_worker_lane_positions() AS p
  JOIN jobs_in AS j
    ON j.queue = p.queue AND j.priority = p.priority AND j.ready_xid <> '0'
   AND (j.ready_xid, j.id) > (p.to_xid, p.to_id)
   AND j.ready_xid >= actor_worker_lane_floor()
 WHERE (j.ready_xid >= p.lo_xmax OR NOT pg_visible_in_snapshot(j.ready_xid, p.tick_lo))
UNION ALL
-- On a lane, of a transaction its position's tick saw running, before the
-- position: not handed out yet (actor_worker_lane_late_jobs: usually none).
SELECT j.id, j.kind, j.queue, j.args, 'available'::text, j.priority, j.run_at,
       j.created_at, j.attempt, j.error_count, j.max_attempts,
       j.last_error_message, j.last_failed_at, NULL::text, NULL::timestamptz,
       NULL::timestamptz, j.metadata,
       j.tags, j.deadline_ms, j.callback_id, j.callback_timeout_at,
       j.callback_result, j.ordering_key, j.unique_key, j.unique_states
  FROM actor_worker_lane_late_jobs() AS j
UNION ALL
-- On a lane, in an open batch, no receipt yet: running (claimed: in its
-- worker's buffer or its handler), held by the batch's worker
-- (actor_worker_open_floor says why it bounds them too).
SELECT j.id, j.kind, j.queue, j.args, 'running'::text, j.priority, j.run_at,
       j.created_at, j.attempt + 1, j.error_count, j.max_attempts,
       j.last_error_message, j.last_failed_at, b.worker, b.claimed_at,
       NULL::timestamptz,
       j.metadata, j.tags, j.deadline_ms, j.callback_id,
       j.callback_timeout_at, j.callback_result, j.ordering_key,
       j.unique_key, j.unique_states
  FROM job_batches AS b
  JOIN jobs_in AS j
    ON j.queue = b.queue AND j.priority = b.priority AND j.ready_xid <> '0'
   AND j.unique_key IS NULL
   AND (j.ready_xid, j.id) >= (b.first_xid, b.first_id)
   AND (j.ready_xid, j.id) <= (b.to_xid, b.to_id)
   AND j.ready_xid >= actor_worker_open_floor()
 WHERE b.on_lane AND b.finished_at IS NULL AND b.rescued_at IS NULL
   AND pg_visible_in_snapshot(j.ready_xid, b.tick_hi)
   AND NOT pg_visible_in_snapshot(j.ready_xid, b.tick_lo)
   AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                    WHERE r.batch_id = b.id AND r.bucket = j.id >> 6
                      AND actor_worker_has_bit(r.mask, j.id))
UNION ALL
-- On a lane, with a receipt that completed it: completed when the receipt
-- was written, by the worker and the claim it names.
SELECT j.id, j.kind, j.queue, j.args, 'completed'::text, j.priority, j.run_at,
       j.created_at, j.attempt + 1, j.error_count, j.max_attempts,
       j.last_error_message, j.last_failed_at, r.worker, r.claimed_at, r.at,
       j.metadata, j.tags, j.deadline_ms, j.callback_id,
       j.callback_timeout_at, j.callback_result, j.ordering_key,
       j.unique_key, j.unique_states
  FROM batch_receipts AS r
  JOIN jobs_in AS j
    ON j.id >> 6 = r.bucket AND actor_worker_has_bit(r.mask, j.id)
   AND j.ready_xid <> '0' AND j.unique_key IS NULL
 WHERE r.done;

-- Writes go to jobs_in: an INSERT, COPY, UPDATE or DELETE of `jobs` says
-- so (actor_worker_jobs_read_only).
CREATE TRIGGER jobs_read_only
  INSTEAD OF INSERT OR UPDATE OR DELETE ON jobs
  FOR EACH ROW EXECUTE FUNCTION actor_worker_jobs_read_only();

CREATE VIEW jobs_live AS SELECT * FROM jobs;
