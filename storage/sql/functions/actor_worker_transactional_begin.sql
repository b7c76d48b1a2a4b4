-- The start of a transactional group's transaction (job_store::transact),
-- in one round trip: its limits, and the leases of its lane jobs.
--
-- Limits: no statement of the transaction, and no pause between its
-- statements, may last longer than p_limit (milliseconds as text, such as
-- '30000'), which is shorter than what is left of every run's lease and
-- deadline; and no lock may be waited for longer than p_lock_timeout
-- (milliseconds as text; '0' = as long as a statement may last). Past the
-- first the server ends the transaction, so a handler that hangs can never
-- hold its jobs or its connection for longer; past the second only the
-- waiting statement fails, and its run goes on alone (a group waits for no
-- other transaction's locks, so two groups never hold each other up).
-- Handlers read the worker their runs belong to (p_worker) as
-- current_setting('actor_worker.worker'). (set_config(..., true) inside
-- this function lasts until the transaction ends: only the variables of
-- its own SET clauses are restored when it returns.)
--
-- Leases: job p_ids[i] is held while it is in lane batch p_batches[i] of
-- worker p_worker that no rescue took back, and no receipt of that batch
-- names it (a completion, or the move of a job that ended otherwise:
-- actor_worker_materialize). The jobs are locked first
-- (actor_worker_lock_lane_jobs), then their batches, shared
-- (actor_worker_share_batches: a take-back passes them by), both without
-- writing a row; they are read after, so a writer that moved one of them,
-- or took its batch back, before the lock was granted is seen. Every
-- other writer of these jobs takes the same job locks and looks afresh
-- after the wait, so it finds the receipt this transaction commits, or
-- the job still on its lane if it rolled back. What is held stays held
-- until the transaction ends, so its completion
-- (actor_worker_transactional_complete) checks nothing again. Returns the
-- ids held. The lock waits here are bounded by p_limit when
-- p_lock_timeout is '0' (this statement runs before its own
-- statement_timeout applies).
CREATE OR REPLACE FUNCTION actor_worker_transactional_begin(
  p_limit text, p_lock_timeout text, p_worker text,
  p_batches bigint[], p_ids bigint[])
RETURNS SETOF bigint
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  PERFORM set_config('statement_timeout', p_limit, true),
          set_config('idle_in_transaction_session_timeout', p_limit, true),
          set_config('actor_worker.worker', p_worker, true),
          set_config('lock_timeout', CASE WHEN p_lock_timeout = '0'
                                          THEN p_limit
                                          ELSE p_lock_timeout END, true);
  IF cardinality(p_ids) > 0 THEN
    PERFORM actor_worker_lock_lane_jobs(p_ids);
    PERFORM actor_worker_share_batches(p_batches);
    -- One probe of the claim and of its receipts per (claim, bucket of 64
    -- ids), not per job: a group's jobs are mostly of one claim and one
    -- or two buckets.
    RETURN QUERY
    SELECT u.id
      FROM (SELECT x.batch, x.id >> 6 AS bucket, array_agg(x.id) AS ids
              FROM unnest(p_batches, p_ids) AS x(batch, id)
             GROUP BY x.batch, x.id >> 6) AS k
     CROSS JOIN LATERAL (SELECT bit_or(r.mask) AS mask FROM batch_receipts AS r
                          WHERE r.batch_id = k.batch
                            AND r.bucket = k.bucket) AS t
     CROSS JOIN LATERAL unnest(k.ids) AS u(id)
     WHERE EXISTS (SELECT 1 FROM job_batches AS b
                    WHERE b.id = k.batch AND b.worker = p_worker
                      AND b.on_lane AND b.rescued_at IS NULL)
       AND (t.mask IS NULL OR NOT actor_worker_has_bit(t.mask, u.id))
     ORDER BY u.id;
  END IF;
  PERFORM set_config('lock_timeout', p_lock_timeout, true);
END
$$;
