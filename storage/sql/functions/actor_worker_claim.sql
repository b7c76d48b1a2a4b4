-- The claim: up to p_limit due jobs of p_queue for worker p_worker, of the
-- kinds p_kinds (NULL: any), whose args and metadata take at most
-- p_max_bytes (but at least one job), lowest priority first; within a
-- priority, jobs off the lanes that came due, then the lane. Each row is a
-- claimed job with its lease (the id of the batch that holds it). A last
-- row with a NULL lease carries `note` when there is something to say:
-- "paused" (nothing was claimed), "limited" (a queue limit cut the claim
-- short; "retry_after_ms" when the rate window binds), "byte_bound",
-- "set_aside" ([{kind, priority, count}]: lane jobs of kinds p_kinds lacks,
-- moved off the lanes for workers that run them), "lane_busy" ([who held
-- a lane's claim lock past p_lane_wait_ms, as actor_worker_lane_wait
-- says]: the claim took nothing off that lane). docs/storage.md explains
-- lanes, ticks and batches; actor_worker_lane_jobs reads a tick,
-- actor_worker_claim_rows claims the jobs off the lanes.
-- Plans: every statement here (and in the functions it calls) is planned
-- once per session (a generic plan). A ring slot starts empty and grows to
-- millions of rows, so a plan made while it was empty could sort a seq
-- scan of it on every later claim: enable_seqscan = off keeps them on
-- their indexes (every statement has one) whatever the statistics said.
CREATE OR REPLACE FUNCTION actor_worker_claim(
  p_queue text, p_worker text, p_limit integer, p_max_bytes bigint,
  p_kinds text[], p_observed text[], p_lane_wait_ms integer)
RETURNS TABLE (lease bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text, note jsonb)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  c record;                     -- actor_worker_claim_allowance
  v_want    integer;            -- jobs this claim may still take
  v_bytes   bigint := 0;        -- args and metadata taken so far
  v_bound   boolean := false;   -- the byte bound stopped it
  v_aside   text[] := '{}';     -- kinds set aside, one entry per job,
  v_ap      integer[] := '{}';  -- and their priorities
  v_rows    bigint := actor_worker_batch_id(false);  -- the row batch
  v_prio integer; v_off boolean;  -- a priority; jobs of it wait off the lanes
  v_row_jobs integer := 0;      -- jobs claimed as rows (in the row batch)
  v_step text; v_holder jsonb;
  v_moved   boolean;            -- it moved jobs off the lane
  v_busy    jsonb := '[]';      -- lanes it skipped: their lock is stuck
  v_lo pg_snapshot; v_hi pg_snapshot; v_px xid8; v_pi bigint;  -- the lane's position
  v_tick integer; v_chunk integer; v_done boolean;  -- the position's tick is used up
  k record; v_n bigint;  -- the jobs of one step (as arrays, or a lane's ids); how many read
BEGIN
  -- 1. The queue's controls: paused, or what its limits leave.
  SELECT * INTO c FROM actor_worker_claim_allowance(p_queue, p_limit);
  IF c.paused THEN
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL, NULL, NULL::integer,
      NULL::integer, NULL::integer, NULL::integer, NULL, NULL::bigint, NULL,
      '{"paused": true}'::jsonb;
    RETURN;
  END IF;
  v_want := greatest(c.allowed, 0);

  FOR v_prio, v_off IN SELECT * FROM actor_worker_claim_order(p_queue) LOOP
  v_moved := false;
  -- Off the lanes first (they came due earlier), then the lane, then off
  -- the lanes again if the lane moved some there that may run now.
  FOREACH v_step IN ARRAY CASE WHEN c.limited THEN '{lane,rows}'::text[]
                               ELSE '{rows,lane,again}' END LOOP
  CONTINUE WHEN v_step <> 'lane' AND NOT (v_moved OR (v_off AND v_step = 'rows'));
  FOR v_tick IN 1..2 LOOP  -- the lane: the rest of its tick, then a new one
    EXIT WHEN v_want <= 0 OR v_bytes >= p_max_bytes OR (v_step <> 'lane' AND v_tick = 2);
    IF v_step <> 'lane' THEN  -- 2. Jobs off the lanes, in the order they came due.
      SELECT * INTO k FROM actor_worker_claim_rows(p_queue, v_prio, v_rows,
        v_want, p_max_bytes - v_bytes, v_bytes = 0, p_kinds);
      v_row_jobs := v_row_jobs + coalesce(cardinality(k.ids), 0);
      RETURN QUERY SELECT v_rows, u.id, u.kind, u.args, v_prio, u.att, u.err,
        coalesce(u.max, 0), u.meta, coalesce(u.dl, 0),
        CASE WHEN u.kind = ANY (p_observed) THEN actor_worker_job_json(u.id, jsonb_build_object(
          'state', 'running', 'attempt', u.att, 'locked_by', p_worker, 'locked_at', now())) END,
        NULL::jsonb FROM unnest(k.ids, k.kinds, k.args, k.att, k.err, k.max, k.meta, k.dl)
                         AS u(id, kind, args, att, err, max, meta, dl);
    ELSE
      IF v_tick = 1 THEN
        -- 3. The lane. Its claims take turns from here to the commit; its
        -- position is its newest batch: a tick, the last job taken in it,
        -- and whether that was the tick's last (then a new tick at once).
        -- A lock held past p_lane_wait_ms is stuck: skip the lane.
        IF NOT pg_try_advisory_xact_lock(hashtext(p_queue), v_prio) THEN
          v_holder := actor_worker_lane_wait(p_queue, v_prio, p_lane_wait_ms);
          IF v_holder IS NOT NULL THEN
            v_busy := v_busy || jsonb_build_array(v_holder);
            EXIT;
          END IF;
        END IF;
        SELECT p.tick_lo, p.tick_hi, p.to_xid, p.to_id, p.tick_done
          INTO v_lo, v_hi, v_px, v_pi, v_done FROM actor_worker_lane_head(p_queue, v_prio) AS p;
        IF NOT FOUND THEN v_hi := '1:1:'; v_done := true; END IF;  -- its first claim
      END IF;
      IF v_tick = 2 OR v_done THEN  -- a new tick, from the last one's end to now
        v_lo := v_hi; v_hi := pg_current_snapshot(); v_px := '0'; v_pi := 0;
      END IF;
      LOOP  -- chunks, until one yields jobs or the tick is used up
        v_chunk := greatest(v_want, 100);
        SELECT * INTO k FROM actor_worker_lane_pick(p_queue, v_prio, v_lo, v_hi,
          v_px, v_pi, v_chunk, v_want, p_max_bytes - v_bytes, v_bytes = 0, p_kinds,
          c.limited);
        IF k.off IS NOT NULL THEN
          v_moved := true;
          UPDATE jobs_in AS j SET ready_xid = '0' WHERE j.id = ANY (k.off) AND j.ready_xid <> '0';
          v_aside := v_aside || coalesce(k.alien, '{}');
          v_ap := v_ap || array_fill(v_prio, ARRAY[coalesce(cardinality(k.alien), 0)]);
        END IF;
        EXIT WHEN k.ids IS NOT NULL OR k.seen < v_chunk;
        v_px := k.px; v_pi := k.pi;  -- all of it went off the lane: read on
      END LOOP;
      IF k.ids IS NOT NULL THEN
        INSERT INTO job_batches (id, queue, priority, worker, on_lane, tick_lo, tick_hi,
                                 first_xid, first_id, to_xid, to_id, size, tick_done)
        VALUES (actor_worker_batch_id(true), p_queue, v_prio, p_worker, true, v_lo, v_hi,
                k.xids[1], k.ids[1], k.xids[cardinality(k.ids)], k.ids[cardinality(k.ids)],
                cardinality(k.ids), k.seen < v_chunk AND NOT k.stop)
        RETURNING job_batches.id INTO lease;
        -- The picks, read again (lane_pick says why; the lane's lock kept them, or it rolls back).
        RETURN QUERY SELECT lease, u.id, u.kind, u.args, v_prio, u.attempt + 1,
          u.error_count, coalesce(u.max_attempts, 0), u.metadata, coalesce(u.deadline_ms, 0),
          CASE WHEN u.kind = ANY (p_observed) THEN actor_worker_job_json(u.id, jsonb_build_object(
            'state', 'running', 'attempt', u.attempt + 1, 'locked_by', p_worker,
            'locked_at', now())) END, NULL::jsonb
          FROM actor_worker_lane_jobs(p_queue, v_prio, v_lo, v_hi, v_px, v_pi,
                                      cardinality(k.ids), k.slot_from, k.slot_to) AS u;
        GET DIAGNOSTICS v_n = ROW_COUNT; IF v_n <> cardinality(k.ids) THEN
          RAISE EXCEPTION 'claim: % lane jobs picked, % read again', cardinality(k.ids), v_n;
        END IF;
      END IF;
      v_bound := v_bound OR (k.stop AND v_want > cardinality(coalesce(k.ids, '{}')));
    END IF;
    v_want := v_want - coalesce(cardinality(k.ids), 0); v_bytes := v_bytes + k.bytes;
    EXIT WHEN v_step <> 'lane' OR k.seen >= v_chunk OR k.stop OR v_done;  -- the tick has more, or was new
  END LOOP;
  END LOOP;
  END LOOP;

  -- 4. The row batch, the rate window, and what the worker should know.
  IF v_row_jobs > 0 THEN
    INSERT INTO job_batches (id, queue, priority, worker, on_lane, size)
    VALUES (v_rows, p_queue, 0, p_worker, false, v_row_jobs);
  END IF;
  IF c.limited AND c.rate_limit IS NOT NULL AND greatest(c.allowed, 0) > v_want THEN
    INSERT INTO queue_starts (queue, started_at, jobs)
    VALUES (p_queue, clock_timestamp(), greatest(c.allowed, 0) - v_want);
  END IF;
  IF cardinality(v_aside) > 0 THEN
    PERFORM pg_notify('actor_worker_jobs', p_queue);
  END IF;
  IF v_bound OR cardinality(v_aside) > 0 OR (c.limited AND c.allowed < p_limit)
     OR jsonb_array_length(v_busy) > 0 THEN
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL, NULL, NULL::integer,
      NULL::integer, NULL::integer, NULL::integer, NULL, NULL::bigint, NULL,
      jsonb_build_object('byte_bound', v_bound,
        'limited', c.limited AND c.allowed < p_limit AND v_want <= 0,
        'retry_after_ms', CASE WHEN c.limited AND c.rate_limit IS NOT NULL
          AND c.started + (greatest(c.allowed, 0) - v_want) >= c.rate_limit
          THEN greatest(1, ceil(extract(epoch FROM coalesce(c.oldest, clock_timestamp())
                 + c.rate_period - clock_timestamp()) * 1000))::bigint END,
        'set_aside', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                        'kind', s.k, 'priority', s.p, 'count', s.n)), '[]')
                        FROM (SELECT u.k, u.p, count(*) AS n FROM unnest(v_aside, v_ap)
                              AS u(k, p) GROUP BY u.k, u.p) AS s),
        'lane_busy', v_busy);
  END IF;
END
$$;
