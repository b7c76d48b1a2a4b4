-- 018_lane_ranges: statements on one claim batch's lane rows stay within
-- the batch, however many jobs one transaction enqueued.
--
-- A batch is the lane range (lo, hi] of (ready_xid, id). Written as two row
-- comparisons, the range is an index condition on the lane index that
-- positions on lo but cannot stop at hi: the btree stops only once the
-- first column, ready_xid, passes hi_xid. When one transaction enqueued
-- many jobs (a bulk load, enqueue_many of a million, an INSERT ... SELECT
-- backlog) they share one ready_xid, and every statement on a batch of
-- them walked the rest of that transaction's rows. Measured after one
-- 500,000-job INSERT drained in batches of up to 2,000: retention deleted
-- 77,000 rows/s (344,000 with this migration), and the UPDATE releasing
-- two jobs of a batch took 64 ms (1.8 ms).
--
-- The statements below name their rows by id (the primary key), so the
-- range is only a guard. It is written with plain comparisons joined by
-- OR, which the planner cannot turn into a lane index range, so it keeps
-- the primary key. The completed ids are compared through a hashed set
-- instead of a linear `<> ALL` over the array. The functions are 004's
-- otherwise unchanged.

CREATE OR REPLACE FUNCTION actor_worker_finish_lane(
  p_worker text, p_jobs bigint[], p_batches bigint[], p_done boolean[],
  p_delete boolean, p_in_doubt boolean DEFAULT false)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_batch  bigint;
  v_done   bigint[];
  v_failed bigint[];
  v_rows   bigint;
  v_count  bigint;
  b        claim_batches;
BEGIN
  FOR v_batch, v_done, v_failed IN
    SELECT o.b, array_agg(o.j) FILTER (WHERE o.done),
           array_agg(o.j) FILTER (WHERE NOT o.done)
      FROM unnest(p_jobs, p_batches, p_done) AS o(j, b, done)
     GROUP BY o.b
  LOOP
    SELECT * INTO b FROM claim_batches AS cb
     WHERE cb.id = v_batch AND cb.worker = p_worker AND cb.closed_at IS NULL
       FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    v_count := 0;
    IF v_done IS NOT NULL THEN
      IF p_delete THEN
        DELETE FROM job_rows AS r
         WHERE r.id = ANY (v_done) AND r.ready_xid IS NOT NULL
           AND r.state = 'available';
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_count := v_count + v_rows;
      ELSE
        IF p_in_doubt THEN
          SELECT array_agg(d) INTO v_done FROM unnest(v_done) AS d
           WHERE NOT EXISTS (SELECT 1 FROM batch_completions AS c
                              WHERE c.batch_id = v_batch AND d = ANY (c.ids));
        END IF;
        IF v_done IS NOT NULL THEN
          INSERT INTO batch_completions (batch_id, ids)
          VALUES (v_batch, v_done);
          v_count := v_count + cardinality(v_done);
        END IF;
      END IF;
    END IF;
    IF v_failed IS NOT NULL THEN
      UPDATE job_rows AS r
         SET state = 'running', attempt = r.attempt + 1, locked_by = p_worker,
             locked_at = now(), ready_xid = NULL
       WHERE r.id = ANY (v_failed)
         AND r.ready_xid IS NOT NULL AND r.state = 'available'
         AND r.queue = b.queue AND r.priority = b.priority
         AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
         AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
      GET DIAGNOSTICS v_rows = ROW_COUNT;
      v_count := v_count + v_rows;
    END IF;
    IF v_count > 0 THEN
      UPDATE claim_batches AS cb
         SET remaining = cb.remaining - v_count,
             closed_at = CASE WHEN cb.remaining - v_count <= 0 THEN now() END
       WHERE cb.id = v_batch;
    END IF;
    RETURN NEXT v_batch;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION actor_worker_release_lane(
  p_worker text, p_jobs bigint[], p_batches bigint[], p_started boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_batch    bigint;
  v_n        integer;
  v_ids      bigint[];
  v_count    bigint;
  v_released bigint := 0;
  b          claim_batches;
BEGIN
  FOR v_batch, v_n, v_ids IN
    SELECT o.b, count(*)::integer, array_agg(o.j)
      FROM unnest(p_jobs, p_batches) AS o(j, b)
     GROUP BY o.b
  LOOP
    SELECT * INTO b FROM claim_batches AS cb
     WHERE cb.id = v_batch AND cb.worker = p_worker AND cb.closed_at IS NULL
       FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    UPDATE job_rows AS r
       SET ready_xid = pg_current_xact_id(),
           attempt = r.attempt + CASE WHEN p_started THEN 1 ELSE 0 END
     WHERE r.id = ANY (v_ids)
       AND r.ready_xid IS NOT NULL AND r.state = 'available'
       AND r.queue = b.queue AND r.priority = b.priority
       AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
       AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
      -- Counted by what moved: a batch closes only when nothing is left.
      UPDATE claim_batches AS cb
         SET remaining = cb.remaining - v_count,
             closed_at = CASE WHEN cb.remaining - v_count <= 0 THEN now() END
       WHERE cb.id = v_batch;
      PERFORM pg_notify('actor_worker_jobs', b.queue);
    END IF;
    v_released := v_released + v_count;
  END LOOP;
  RETURN v_released;
END
$$;

CREATE OR REPLACE FUNCTION actor_worker_expire_batches(
  p_window_seconds double precision, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  b claim_batches;
  v_done bigint[];
  v_count integer := 0;
BEGIN
  FOR b IN
    SELECT * FROM claim_batches AS x
     WHERE x.closed_at IS NULL
       AND x.heartbeat_at < now() - make_interval(secs => p_window_seconds)
     ORDER BY x.id
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED
  LOOP
    SELECT coalesce(array_agg(x), '{}') INTO v_done
      FROM batch_completions AS c, unnest(c.ids) AS x
     WHERE c.batch_id = b.id;
    UPDATE job_rows AS r
       SET state = 'running', attempt = r.attempt + 1, locked_by = b.worker,
           locked_at = b.heartbeat_at, ready_xid = NULL
     WHERE r.id IN (SELECT x.id FROM actor_worker_batch_rows(b) AS x
                     WHERE x.state = 'available')
       AND r.ready_xid IS NOT NULL AND r.state = 'available'
       AND r.id NOT IN (SELECT unnest(v_done));
    UPDATE claim_batches SET closed_at = now(), remaining = 0
     WHERE id = b.id;
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

CREATE OR REPLACE FUNCTION actor_worker_cleanup_lanes(
  p_retention_seconds double precision, p_max_jobs integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  b claim_batches;
  v_done bigint[];
  v_deleted bigint := 0;
  v_n bigint;
BEGIN
  -- Bounded by jobs, not batches: batches are as small as one job when
  -- enqueues trickle in, and retention must keep up with completions.
  FOR b IN
    SELECT * FROM claim_batches AS x
     WHERE x.closed_at < now() - make_interval(secs => p_retention_seconds)
     ORDER BY x.closed_at
     LIMIT p_max_jobs
       FOR UPDATE SKIP LOCKED
  LOOP
    EXIT WHEN v_deleted >= p_max_jobs;
    SELECT coalesce(array_agg(x), '{}') INTO v_done
      FROM batch_completions AS c, unnest(c.ids) AS x
     WHERE c.batch_id = b.id;
    -- By primary key, from the receipts; the range check is a guard.
    DELETE FROM job_rows AS r
     WHERE r.id = ANY (v_done)
       AND r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.state = 'available'
       AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
       AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_deleted := v_deleted + v_n;
    -- A safety net: a closed batch has no unfinished job on its lane. If
    -- one were left, deleting the batch would leave it behind the cursor,
    -- never claimed; put it back on its lane instead (it runs again). Only
    -- a batch whose receipts do not cover it all needs the look.
    IF v_n < b.size THEN
      UPDATE job_rows AS r SET ready_xid = pg_current_xact_id()
       WHERE r.id IN (SELECT x.id FROM actor_worker_batch_rows(b) AS x
                       WHERE x.state = 'available')
         AND r.ready_xid IS NOT NULL AND r.state = 'available';
      GET DIAGNOSTICS v_n = ROW_COUNT;
      IF v_n > 0 THEN
        RAISE WARNING 'actor-worker: % job(s) of closed batch % put back', v_n, b.id;
      END IF;
    END IF;
    DELETE FROM batch_completions WHERE batch_id = b.id;
    DELETE FROM claim_batches WHERE id = b.id;
  END LOOP;
  RETURN v_deleted;
END
$$;
