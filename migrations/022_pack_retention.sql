-- 022_pack_retention: retention of packs keeps up with packed enqueues.
--
-- The soak with a packed producer (bench/soak.sh ENQUEUE=packed,
-- bench/results/2026-12-02-soak-packed.txt) found 020's cleanup_lanes
-- slow per pack: it read the receipts of the next p.n + 1 batches in range
-- order to find the one or two that cover the pack, and batches hold up to
-- local_queue_size jobs (1,547 on average there), so some 184,000 receipt
-- ids were unnested to find 100. Retention fell behind the producer,
-- job_packs grew without bound, and each cleanup transaction stayed open
-- for seconds: past fence_wait, so the claims moved the lane jobs enqueued
-- behind it off the lane (94,000 jobs unpacked in the first 10 minutes,
-- each then claimed and completed as a row).
--
-- Now the receipts read are those of the batches whose range meets the
-- pack's keys, and the pack's ids come from its first id and size rather
-- than from building its jobs' rows.

-- The ids of the jobs still in pack p, in order (actor_worker_pack_rows'
-- ids, without building the rows).
CREATE FUNCTION actor_worker_pack_ids(p job_packs) RETURNS SETOF bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT i FROM generate_series(p.first_id, p.first_id + p.n - 1) AS i
   WHERE cardinality(p.unpacked) = 0 OR NOT (i = ANY (p.unpacked))
$$;

-- Retention of lane rows and packs (020), with the changes above marked
-- (022).
CREATE OR REPLACE FUNCTION actor_worker_cleanup_lanes(
  p_retention_seconds double precision, p_max_jobs integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  l claim_cursors;
  b claim_batches;
  v_floor_xid xid8;
  v_floor_id bigint;
  v_done bigint[];
  v_deleted bigint := 0;
  v_batches bigint := 0;
  v_n bigint;
  v_cutoff timestamptz := now() - make_interval(secs => p_retention_seconds);
  p job_packs;
  v_lost bigint[];
  v_pack_xid xid8;
  v_pack_id bigint;
  v_last bigint;
BEGIN
  FOR l IN SELECT * FROM claim_cursors ORDER BY queue, priority LOOP
    -- Bounded by jobs (and batches with no job left): batches are as small
    -- as one job when enqueues trickle in, and retention must keep up with
    -- completions.
    EXIT WHEN v_deleted + v_batches >= p_max_jobs;
    -- (020) Packs, oldest first. A pack goes once the cursor is past the
    -- last job still in it and every batch over it closed before the
    -- cutoff (its batches are at most one per job, consecutive in range
    -- order). As the safety net above: a job still in it without a
    -- receipt gets a row with a fresh lane key (it runs again), and the
    -- pack goes in a later round.
    FOR p IN
      SELECT * FROM job_packs AS x
       WHERE x.queue = l.queue AND x.priority = l.priority
       ORDER BY x.ready_xid, x.first_id
         FOR UPDATE SKIP LOCKED
    LOOP
      EXIT WHEN v_deleted + v_batches >= p_max_jobs;
      -- (Its last job still in it: those after it may have left unclaimed,
      -- a cancel or the fence, and the cursor never meets their keys.)
      v_last := (SELECT max(i) FROM actor_worker_pack_ids(p) AS i); -- (022)
      EXIT WHEN v_last IS NOT NULL
                AND (l.last_xid, l.last_id) < (p.ready_xid, v_last);
      EXIT WHEN EXISTS (
        SELECT 1 FROM (SELECT * FROM claim_batches AS x
                        WHERE x.queue = l.queue AND x.priority = l.priority
                          AND (x.hi_xid, x.hi_id) >= (p.ready_xid, p.first_id)
                        ORDER BY x.hi_xid, x.hi_id
                        LIMIT p.n + 1) AS ob
         WHERE (ob.lo_xid, ob.lo_id) < (p.ready_xid, p.first_id + p.n - 1)
           AND (ob.closed_at IS NULL OR ob.closed_at >= v_cutoff));
      -- (022) Only the batches whose range meets the pack's keys: the
      -- next p.n + 1 in range order may reach far past it (a batch holds
      -- up to local_queue_size jobs), and their receipts are what cost.
      WITH over AS (
        SELECT ob.id FROM (SELECT x.id, x.lo_xid, x.lo_id FROM claim_batches AS x
                            WHERE x.queue = l.queue AND x.priority = l.priority
                              AND (x.hi_xid, x.hi_id) >= (p.ready_xid, p.first_id)
                            ORDER BY x.hi_xid, x.hi_id
                            LIMIT p.n + 1) AS ob
         WHERE (ob.lo_xid, ob.lo_id) < (p.ready_xid, p.first_id + p.n - 1)
      ), receipted AS MATERIALIZED (
        SELECT d FROM over JOIN batch_completions AS c ON c.batch_id = over.id,
               unnest(c.ids) AS d
         WHERE d BETWEEN p.first_id AND p.first_id + p.n - 1
      )
      SELECT array_agg(i) INTO v_lost FROM actor_worker_pack_ids(p) AS i
       WHERE NOT EXISTS (SELECT 1 FROM receipted WHERE receipted.d = i);
      IF v_lost IS NOT NULL THEN
        PERFORM actor_worker_unpack(v_lost);
        UPDATE job_rows AS r SET ready_xid = pg_current_xact_id()
         WHERE r.id = ANY (v_lost) AND r.ready_xid IS NOT NULL
           AND r.state = 'available';
        RAISE WARNING 'actor-worker: % job(s) of pack % put back',
          cardinality(v_lost), p.first_id;
        EXIT;
      END IF;
      DELETE FROM job_packs AS x WHERE x.first_id = p.first_id;
      v_deleted := v_deleted + p.n - cardinality(p.unpacked);
    END LOOP;
    SELECT f.ready_xid, f.id INTO v_floor_xid, v_floor_id
      FROM job_rows AS f
     WHERE f.queue = l.queue AND f.priority = l.priority
       AND f.ready_xid IS NOT NULL
       AND (CASE WHEN f.ready_xid IS NULL THEN NULL ELSE f.lane_gen END)
           IS NOT NULL
     ORDER BY f.ready_xid, f.id LIMIT 1;
    -- (020) The oldest pack left is a floor too: the batches over it keep
    -- their receipts until it goes.
    SELECT x.ready_xid, x.first_id INTO v_pack_xid, v_pack_id
      FROM job_packs AS x
     WHERE x.queue = l.queue AND x.priority = l.priority
     ORDER BY x.ready_xid, x.first_id LIMIT 1;
    IF v_pack_xid IS NOT NULL
       AND (v_floor_xid IS NULL
            OR (v_pack_xid, v_pack_id) < (v_floor_xid, v_floor_id)) THEN
      v_floor_xid := v_pack_xid;
      v_floor_id := v_pack_id;
    END IF;
    FOR b IN
      SELECT * FROM claim_batches AS x
       WHERE x.queue = l.queue AND x.priority = l.priority
         AND (x.hi_xid, x.hi_id) < (coalesce(v_floor_xid, '18446744073709551615'),
                                    coalesce(v_floor_id, 0))
         AND x.closed_at < v_cutoff
       ORDER BY x.hi_xid, x.hi_id
       LIMIT p_max_jobs - v_deleted - v_batches
         FOR UPDATE SKIP LOCKED
    LOOP
      EXIT WHEN v_deleted + v_batches >= p_max_jobs;
      SELECT coalesce(array_agg(x), '{}') INTO v_done
        FROM batch_completions AS c, unnest(c.ids) AS x
       WHERE c.batch_id = b.id;
      -- By primary key, from the receipts; the range check is a guard.
      DELETE FROM job_rows_main AS r
       WHERE r.id = ANY (v_done)
         AND r.queue = b.queue AND r.priority = b.priority
         AND r.ready_xid IS NOT NULL AND r.state = 'available'
         AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
         AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
      GET DIAGNOSTICS v_n = ROW_COUNT;
      v_deleted := v_deleted + v_n;
      -- A batch whose rows went with their partition counts as one.
      IF v_n = 0 THEN
        v_batches := v_batches + 1;
      END IF;
      -- A safety net: a closed batch has no unfinished job on its lane. If
      -- one were left, deleting the batch would leave it behind the cursor,
      -- never claimed; put it back on its lane instead (it runs again).
      IF v_n < b.size THEN
        UPDATE job_rows AS r SET ready_xid = pg_current_xact_id()
         WHERE r.id IN (SELECT x.id FROM actor_worker_batch_rows(b) AS x
                         WHERE x.state = 'available'
                           AND x.id NOT IN (SELECT unnest(v_done)))
           AND r.ready_xid IS NOT NULL AND r.state = 'available';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
          RAISE WARNING 'actor-worker: % job(s) of closed batch % put back', v_n, b.id;
        END IF;
      END IF;
      DELETE FROM batch_completions WHERE batch_id = b.id;
      DELETE FROM claim_batches WHERE id = b.id;
    END LOOP;
  END LOOP;
  RETURN v_deleted;
END
$$;

-- CREATE OR REPLACE dropped the settings 020 gave it.
ALTER FUNCTION actor_worker_cleanup_lanes(double precision, integer)
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION actor_worker_cleanup_lanes(double precision, integer)
  SET jit = off;
