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
-- says]: the claim took nothing off that lane).
-- docs/storage.md explains lanes, ticks and batches. This file is the
-- whole claim: this function, then the helpers only it calls, in the order
-- it calls them, each named for what it returns:
--   actor_worker_claim_allowance   what the queue's controls allow
--   actor_worker_claim_order       its priorities, and which have jobs off the lanes
--   actor_worker_claim_rows        the jobs it claims off the lanes (as arrays)
--   actor_worker_claimed_row_jobs  those as this function returns them
--   actor_worker_lane_wait         who holds a lane's claim lock (NULL: we do now)
--   actor_worker_lane_batch        the lane batch it takes from one tick
--   actor_worker_lane_pick         one chunk of the tick, and which jobs it takes
--   actor_worker_claimed_lane_jobs the batch's jobs as this function returns them
-- It also calls four functions other statements share, each in a file of
-- its own: actor_worker_lane_head (a lane's position), actor_worker_lane_jobs
-- (a tick's jobs), actor_worker_batch_id, actor_worker_job_json.
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
  c record;                     -- the queue's controls (actor_worker_claim_allowance)
  v_want    integer;            -- jobs this claim may still take
  v_bytes   bigint := 0;        -- args and metadata taken so far
  v_bound   boolean := false;   -- the byte bound stopped it
  v_rows    bigint := actor_worker_batch_id(false);  -- the row batch
  v_row_jobs integer := 0;      -- jobs claimed off the lanes (in the row batch)
  v_aside   text[] := '{}';     -- kinds set aside, one entry per job,
  v_ap      integer[] := '{}';  -- and their priorities
  v_busy    jsonb := '[]';      -- lanes it skipped: their lock is stuck
  v_prio    integer;            -- a priority,
  v_off     boolean;            -- and whether jobs of it wait off the lanes
  v_moved   boolean;            -- its lane moved jobs off the lanes
  v_holder  jsonb;              -- who holds the lane's claim lock
  v_lo pg_snapshot; v_hi pg_snapshot;  -- the tick it reads,
  v_px xid8; v_pi bigint;       -- from after this job (the lane's position)
  v_new_tick boolean;           -- a tick that starts now
  r record;                     -- the jobs claimed off the lanes (actor_worker_claim_rows)
  t record;                     -- a lane batch (actor_worker_lane_batch)
BEGIN
  -- The queue's controls: paused, or what its limits leave.
  SELECT * INTO c FROM actor_worker_claim_allowance(p_queue, p_limit);
  IF c.paused THEN
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL, NULL, NULL::integer,
      NULL::integer, NULL::integer, NULL::integer, NULL, NULL::bigint, NULL,
      '{"paused": true}'::jsonb;
    RETURN;
  END IF;
  v_want := greatest(c.allowed, 0);

  FOR v_prio, v_off IN SELECT * FROM actor_worker_claim_order(p_queue) LOOP
    EXIT WHEN v_want <= 0 OR v_bytes >= p_max_bytes;
    v_moved := false;

    -- 1. Jobs off the lanes first: they came due earlier (retries, snoozes,
    -- scheduled jobs). A limited queue claims them after its lane instead,
    -- which moves all of its jobs off (below).
    IF v_off AND NOT c.limited THEN
      SELECT * INTO r FROM actor_worker_claim_rows(p_queue, v_prio, v_rows,
        v_want, p_max_bytes - v_bytes, v_bytes = 0, p_kinds);
      RETURN QUERY SELECT * FROM actor_worker_claimed_row_jobs(v_rows, v_prio,
        p_worker, p_observed, r.ids, r.kinds, r.args, r.att, r.err, r.max, r.meta, r.dl);
      v_row_jobs := v_row_jobs + coalesce(cardinality(r.ids), 0);
      v_want := v_want - coalesce(cardinality(r.ids), 0);
      v_bytes := v_bytes + r.bytes;
    END IF;

    -- 2. The lane. Its claims take turns from here to the commit; one that
    -- holds the lock past p_lane_wait_ms is stuck, and the lane is skipped.
    IF v_want > 0 AND v_bytes < p_max_bytes THEN
      v_holder := actor_worker_lane_wait(p_queue, v_prio, p_lane_wait_ms);
      IF v_holder IS NOT NULL THEN
        v_busy := v_busy || jsonb_build_array(v_holder);
      ELSE
        -- Its position is its newest batch: a tick, the last job taken in
        -- it, and whether that was the tick's last (tick_done). The claim
        -- takes the rest of that tick; when it runs out with room to spare
        -- (or was used up already), a new tick, from its end to now.
        SELECT p.tick_lo, p.tick_hi, p.to_xid, p.to_id, p.tick_done
          INTO v_lo, v_hi, v_px, v_pi, v_new_tick
          FROM actor_worker_lane_head(p_queue, v_prio) AS p;
        IF NOT FOUND THEN  -- the lane's first claim
          v_hi := '1:1:'; v_new_tick := true;
        END IF;
        LOOP
          IF v_new_tick THEN
            v_lo := v_hi; v_hi := pg_current_snapshot(); v_px := '0'; v_pi := 0;
          END IF;
          SELECT * INTO t FROM actor_worker_lane_batch(p_queue, v_prio, p_worker,
            v_lo, v_hi, v_px, v_pi, v_want, p_max_bytes - v_bytes,
            v_bytes = 0, p_kinds, c.limited);
          IF t.lease IS NOT NULL THEN
            RETURN QUERY SELECT * FROM actor_worker_claimed_lane_jobs(p_queue, v_prio,
              p_worker, p_observed, t.lease, v_lo, v_hi, t.after_xid, t.after_id,
              t.taken, t.slot_from, t.slot_to);
          END IF;
          v_moved := v_moved OR t.moved;
          v_aside := v_aside || t.alien;
          v_ap := v_ap || array_fill(v_prio, ARRAY[cardinality(t.alien)]);
          v_bound := v_bound OR (t.stop AND v_want > t.taken);
          v_want := v_want - t.taken;
          v_bytes := v_bytes + t.bytes;
          EXIT WHEN v_new_tick OR NOT t.used_up OR t.stop
                    OR v_want <= 0 OR v_bytes >= p_max_bytes;
          v_new_tick := true;
        END LOOP;
      END IF;
    END IF;

    -- 3. Off the lanes again, for the jobs the lane just moved there that
    -- may run now: all of a limited queue's, and any past their attempt
    -- limit (claim_rows dead-letters them).
    IF (v_moved OR (v_off AND c.limited)) AND v_want > 0 AND v_bytes < p_max_bytes THEN
      SELECT * INTO r FROM actor_worker_claim_rows(p_queue, v_prio, v_rows,
        v_want, p_max_bytes - v_bytes, v_bytes = 0, p_kinds);
      RETURN QUERY SELECT * FROM actor_worker_claimed_row_jobs(v_rows, v_prio,
        p_worker, p_observed, r.ids, r.kinds, r.args, r.att, r.err, r.max, r.meta, r.dl);
      v_row_jobs := v_row_jobs + coalesce(cardinality(r.ids), 0);
      v_want := v_want - coalesce(cardinality(r.ids), 0);
      v_bytes := v_bytes + r.bytes;
    END IF;
  END LOOP;

  -- The row batch, the rate window, and what the worker should know.
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


-- -- actor_worker_claim_allowance -------------------------------------

-- What a claim of up to p_limit jobs of p_queue may take under the queue's
-- cluster-wide controls (queue_controls): nothing when it is paused; at
-- most what global_concurrency and rate_limit leave when it is limited.
-- One primary-key read for a queue without limits; a limited queue's
-- claims take turns on its row (FOR UPDATE) until they commit, so each
-- counts what the one before it took. `limited`: a limit applies (its
-- jobs are then all claimed as rows, so that its running ones count);
-- `started` and `oldest`: the claims in the rate window so far, and the
-- first of them; `rate_limit`, `rate_period`: the queue's.
CREATE OR REPLACE FUNCTION actor_worker_claim_allowance(p_queue text,
                                                        p_limit integer)
RETURNS TABLE (paused boolean, limited boolean, allowed integer,
               started bigint, oldest timestamptz, rate_limit integer,
               rate_period interval)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  c queue_controls;
BEGIN
  paused := false; limited := false; allowed := p_limit; started := 0;
  SELECT * INTO c FROM queue_controls AS q WHERE q.queue = p_queue;
  IF FOUND AND NOT c.paused
     AND (c.global_concurrency IS NOT NULL OR c.rate_limit IS NOT NULL) THEN
    SELECT * INTO c FROM queue_controls AS q WHERE q.queue = p_queue FOR UPDATE;
    limited := NOT c.paused;
  END IF;
  paused := coalesce(c.paused, false);
  rate_limit := c.rate_limit; rate_period := c.rate_period;
  IF limited THEN
    allowed := least(p_limit, coalesce(c.global_concurrency - (SELECT count(*)
      FROM jobs_in AS j WHERE j.state = 'running' AND j.queue = p_queue), p_limit));
    IF c.rate_limit IS NOT NULL THEN
      DELETE FROM queue_starts AS q
       WHERE q.queue = p_queue AND q.started_at <= clock_timestamp() - c.rate_period;
      SELECT coalesce(sum(q.jobs), 0), min(q.started_at) INTO started, oldest
        FROM queue_starts AS q WHERE q.queue = p_queue;
      allowed := least(allowed, c.rate_limit - started);
    END IF;
  END IF;
  RETURN NEXT;
END
$$;


-- -- actor_worker_claim_order -----------------------------------------

-- The priorities queue p_queue has jobs of, lowest first, on its lanes or
-- waiting off them (available or scheduled): what a claim goes through.
-- `off_lanes`: jobs of that priority wait off the lanes, so the claim
-- looks for due ones there (actor_worker_claim_rows); without any it skips
-- that statement, which opens every partition of jobs. Two skip scans, one
-- probe per priority each (jobs_lane_idx, jobs_due_idx); lane jobs never
-- have a unique key (actor_worker_jobs_inserted moves them off), so the
-- lane probes leave jobs_unique out at plan time.
CREATE OR REPLACE FUNCTION actor_worker_claim_order(p_queue text)
RETURNS TABLE (priority integer, off_lanes boolean)
LANGUAGE sql STABLE
AS $$
  WITH RECURSIVE lane(p) AS (
    (SELECT j.priority FROM jobs_in AS j
      WHERE j.queue = p_queue AND j.ready_xid <> '0' AND j.unique_key IS NULL
      ORDER BY j.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs_in AS j
             WHERE j.queue = p_queue AND j.ready_xid <> '0' AND j.unique_key IS NULL
               AND j.priority > lane.p
             ORDER BY j.priority LIMIT 1)
      FROM lane WHERE lane.p IS NOT NULL
  ), off(p) AS (
    (SELECT j.priority FROM jobs_in AS j
      WHERE j.queue = p_queue AND j.ready_xid = '0'
        AND j.state IN ('available', 'scheduled')
      ORDER BY j.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs_in AS j
             WHERE j.queue = p_queue AND j.ready_xid = '0'
               AND j.state IN ('available', 'scheduled') AND j.priority > off.p
             ORDER BY j.priority LIMIT 1)
      FROM off WHERE off.p IS NOT NULL
  )
  SELECT x.p, bool_or(x.off)
    FROM (SELECT p, false AS off FROM lane UNION ALL SELECT p, true FROM off) AS x
   WHERE x.p IS NOT NULL
   GROUP BY x.p
   ORDER BY x.p
$$;


-- -- actor_worker_claim_rows ------------------------------------------

-- The claim's part for jobs off the lanes (scheduled, retried, parked and
-- released jobs, ordering keys, unique jobs, kinds set aside): up to
-- p_limit due jobs of one queue and priority, in the order they came due,
-- of the kinds p_kinds (NULL: any), within p_max_bytes of args and
-- metadata (but at least one job when p_first), each row marked running
-- in the row batch p_batch. One row: the jobs as arrays in claim order
-- (`seen`, `stop`, `ids` and `bytes` as actor_worker_lane_pick has them);
-- `off` lists the due rows at the attempt limit (1,000,000), which it
-- moved to the dead letter queue.
-- FOR UPDATE SKIP LOCKED: concurrent claims take different rows and never
-- wait for each other. A job a rescue gave back without knowing whether
-- it had started (start_unknown) is recorded as started by this claim,
-- before its handler can run (migrations/002_job_starts.sql).
CREATE OR REPLACE FUNCTION actor_worker_claim_rows(
  p_queue text, p_priority integer, p_batch bigint, p_limit integer,
  p_max_bytes bigint, p_first boolean, p_kinds text[])
RETURNS TABLE (seen bigint, stop boolean, ids bigint[], kinds text[],
               args text[], att integer[], err integer[], max integer[],
               meta text[], dl bigint[], bytes bigint, xids xid8[],
               off bigint[], alien text[], px xid8, pi bigint)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
  WITH picked AS (
    SELECT j.id, j.run_at, j.attempt, j.start_unknown,
           pg_column_size(j.args) + pg_column_size(j.metadata) AS bytes
      FROM jobs_in AS j
     WHERE j.queue = p_queue AND j.priority = p_priority
       AND j.ready_xid = '0' AND j.state IN ('available', 'scheduled')
       AND j.run_at <= now()
       AND (p_kinds IS NULL OR j.kind = ANY (p_kinds))
       -- A row whose attempt cannot grow is dead-lettered by the rescue
       -- (actor_worker_rescue), never claimed: it must not stop its queue.
       -- A job with an ordering key waits for every earlier unfinished job
       -- of its key (one being claimed right now is still 'available' in
       -- this snapshot, so two of a key never run at once).
       AND (j.ordering_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM jobs_in AS o
              WHERE o.ordering_key = j.ordering_key AND o.id < j.id
                AND o.state IN ('scheduled', 'available', 'running',
                                'waiting_external')))
     ORDER BY j.run_at, j.id
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED
  ), chosen AS (
    SELECT s.id, s.n, s.start_unknown FROM (
      SELECT p.id, p.start_unknown, row_number() OVER w AS n,
             sum(p.bytes) OVER w AS bytes
        FROM picked AS p WHERE p.attempt < 1000000
      WINDOW w AS (ORDER BY p.run_at, p.id)) AS s
     WHERE s.bytes <= p_max_bytes OR (s.n = 1 AND p_first)
  ), claimed AS (
    UPDATE jobs_in AS j
       SET state = 'running', attempt = j.attempt + 1, batch_id = p_batch,
           start_unknown = false
      FROM chosen
     WHERE j.id = chosen.id
    RETURNING chosen.n, chosen.start_unknown AS was_unknown, j.id, j.kind, j.args::text AS args, j.attempt,
              j.error_count, j.max_attempts, j.metadata::text AS metadata,
              j.deadline_ms,
              pg_column_size(j.args) + pg_column_size(j.metadata) AS bytes
  ), recorded AS (
    INSERT INTO job_starts (batch_id, ids)
    SELECT p_batch, array_agg(c.id) FROM claimed AS c WHERE c.was_unknown
    HAVING count(*) > 0
  )
  SELECT count(*), false, array_agg(c.id ORDER BY c.n),
         array_agg(c.kind ORDER BY c.n), array_agg(c.args ORDER BY c.n),
         array_agg(c.attempt ORDER BY c.n), array_agg(c.error_count ORDER BY c.n),
         array_agg(c.max_attempts ORDER BY c.n), array_agg(c.metadata ORDER BY c.n),
         array_agg(c.deadline_ms ORDER BY c.n), coalesce(sum(c.bytes), 0)::bigint,
         NULL::xid8[],
         (SELECT array_agg(p.id) FROM picked AS p WHERE p.attempt >= 1000000),
         NULL::text[], NULL::xid8, NULL::bigint
    INTO seen, stop, ids, kinds, args, att, err, max, meta, dl, bytes, xids, off,
         alien, px, pi
    FROM claimed AS c;
  -- Rows at the attempt limit cannot run again: dead-lettered at once.
  -- (Only when there are any: the statement opens every partition of jobs.)
  IF off IS NOT NULL THEN
    PERFORM actor_worker_dead_letter(j.id, format(
              'attempt limit reached: attempt %s, and a job runs at most '
              '1,000,000 times; set aside by a claim', j.attempt))
       FROM jobs_in AS j WHERE j.id = ANY (off) AND j.ready_xid = '0';
  END IF;
  RETURN NEXT;
END
$$;


-- -- actor_worker_claimed_row_jobs ------------------------------------

-- The jobs claimed off the lanes into row batch p_batch, as
-- actor_worker_claim_rows returns them (arrays in claim order), turned
-- into the claim's rows (actor_worker_claim's columns). p_observed: the
-- kinds whose hooks see the running job's row (event_row).
CREATE OR REPLACE FUNCTION actor_worker_claimed_row_jobs(
  p_batch bigint, p_priority integer, p_worker text, p_observed text[],
  p_ids bigint[], p_kinds text[], p_args text[], p_attempts integer[],
  p_errors integer[], p_max_attempts integer[], p_metadata text[],
  p_deadlines bigint[])
RETURNS TABLE (lease bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text, note jsonb)
LANGUAGE sql STABLE
AS $$
  SELECT p_batch, u.id, u.kind, u.args, p_priority, u.att, u.err,
         coalesce(u.max, 0), u.meta, coalesce(u.dl, 0),
         CASE WHEN u.kind = ANY (p_observed) THEN actor_worker_job_json(u.id,
           jsonb_build_object('state', 'running', 'attempt', u.att,
                              'locked_by', p_worker, 'locked_at', now())) END,
         NULL::jsonb
    FROM unnest(p_ids, p_kinds, p_args, p_attempts, p_errors, p_max_attempts,
                p_metadata, p_deadlines) AS u(id, kind, args, att, err, max, meta, dl)
$$;


-- -- actor_worker_lane_wait -------------------------------------------

-- Takes the claim lock of lane (p_queue, p_priority) for actor_worker_claim,
-- held to the end of the transaction: at once when it is free, else after
-- waiting at most p_wait_ms for the session that holds it. Returns NULL
-- once the lock is taken; or, when the wait ran out, who holds it:
-- {"priority", "pid", "application_name", "state", "xact_seconds"}.
-- A claim holds the lock for milliseconds. One held for seconds is stuck:
-- a hung server process, a client gone while the server still sends it a
-- large result, an operator's transaction left open on `jobs cancel`.
-- Waiting on it without bound would stall the claiming connection, and
-- with it the worker's heartbeat and every job off the lane; so the claim
-- skips the lane instead, and says who holds it.
CREATE OR REPLACE FUNCTION actor_worker_lane_wait(
  p_queue text, p_priority integer, p_wait_ms integer)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
  v_timeout text := current_setting('lock_timeout');
BEGIN
  IF pg_try_advisory_xact_lock(hashtext(p_queue), p_priority) THEN
    RETURN NULL;  -- free: no wait, and no subtransaction
  END IF;
  -- A block with a handler is a subtransaction: the timeout's error
  -- undoes only the block, and the lock_timeout it set with it.
  BEGIN
    PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
    PERFORM pg_advisory_xact_lock(hashtext(p_queue), p_priority);
    PERFORM set_config('lock_timeout', v_timeout, true);
    RETURN NULL;
  EXCEPTION WHEN lock_not_available THEN
    -- A two-key advisory lock shows its keys as classid and objid. The
    -- holder may have let go since: the lane is still skipped this time.
    RETURN coalesce(
      (SELECT jsonb_build_object(
                'priority', p_priority, 'pid', l.pid,
                'application_name', a.application_name, 'state', a.state,
                'xact_seconds', round(extract(epoch FROM clock_timestamp()
                                                     - a.xact_start)::numeric, 1))
         FROM pg_locks AS l
         LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted
          AND l.database = (SELECT oid FROM pg_database
                             WHERE datname = current_database())
          AND l.classid = hashtext(p_queue)::oid
          AND l.objid = p_priority::oid AND l.objsubid = 2
        LIMIT 1),
      jsonb_build_object('priority', p_priority));
  END;
END
$$;


-- -- actor_worker_lane_batch ------------------------------------------

-- The lane batch a claim (actor_worker_claim) takes from one tick of lane
-- (p_queue, p_priority): reads the tick (p_lo, p_hi) after the position
-- (p_px, p_pi) a chunk at a time (actor_worker_lane_pick), moves off the
-- lane the jobs it meets that it may not take, and stops at the first chunk
-- that yields jobs, or at the tick's end. Moved off, to be claimed as rows:
-- jobs not due, keyed, not 'available', past their attempt limit, of a
-- kind p_kinds (NULL: any) lacks, or of a limited queue (p_all_off: all of
-- them). The jobs it takes (up to p_want, within p_max_bytes of args and
-- metadata, but at least one when p_first) become one job_batches row: its
-- tick, the first and last job it took, and whether that was the tick's
-- last (tick_done: the lane's next claim starts a new tick at once).
-- One row:
--   lease      the batch's id (NULL: it took no job)
--   taken, bytes  how many jobs it took, and their args and metadata
--   after_xid, after_id  the position they follow (actor_worker_claimed_lane_jobs
--              reads them again from there)
--   slot_from, slot_to  the ring slots that hold them
--   used_up    it read the tick to its end
--   stop       it stopped at a job it could take but had no room for
--   moved      it moved jobs off the lane
--   alien      the kinds of the jobs it moved for lack of a worker, one
--              entry per job (the claim's "set_aside" note)
CREATE OR REPLACE FUNCTION actor_worker_lane_batch(
  p_queue text, p_priority integer, p_worker text, p_lo pg_snapshot,
  p_hi pg_snapshot, p_px xid8, p_pi bigint, p_want integer, p_max_bytes bigint,
  p_first boolean, p_kinds text[], p_all_off boolean)
RETURNS TABLE (lease bigint, taken integer, bytes bigint, after_xid xid8,
               after_id bigint, slot_from smallint, slot_to smallint,
               used_up boolean, stop boolean, moved boolean, alien text[])
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
DECLARE
  v_chunk integer := greatest(p_want, 100);  -- jobs read at a time
  k record;                                  -- one chunk (actor_worker_lane_pick)
BEGIN
  after_xid := p_px; after_id := p_pi; moved := false; alien := '{}';
  LOOP
    SELECT * INTO k FROM actor_worker_lane_pick(p_queue, p_priority, p_lo, p_hi,
      after_xid, after_id, v_chunk, p_want, p_max_bytes, p_first, p_kinds,
      p_all_off);
    IF k.off IS NOT NULL THEN
      UPDATE jobs_in AS j SET ready_xid = '0'
       WHERE j.id = ANY (k.off) AND j.ready_xid <> '0';
      moved := true;
      alien := alien || coalesce(k.alien, '{}');
    END IF;
    EXIT WHEN k.ids IS NOT NULL OR k.seen < v_chunk;
    after_xid := k.px; after_id := k.pi;  -- the whole chunk went off: read on
  END LOOP;
  taken := coalesce(cardinality(k.ids), 0); bytes := k.bytes;
  used_up := k.seen < v_chunk; stop := k.stop;
  slot_from := k.slot_from; slot_to := k.slot_to;
  IF taken > 0 THEN
    INSERT INTO job_batches (id, queue, priority, worker, on_lane, tick_lo,
                             tick_hi, first_xid, first_id, to_xid, to_id, size,
                             tick_done)
    VALUES (actor_worker_batch_id(true), p_queue, p_priority, p_worker, true,
            p_lo, p_hi, k.xids[1], k.ids[1], k.xids[taken], k.ids[taken], taken,
            used_up AND NOT stop)
    RETURNING job_batches.id INTO lease;
  END IF;
  RETURN NEXT;
END
$$;


-- -- actor_worker_lane_pick -------------------------------------------

-- One chunk of a lane's tick for the claim (actor_worker_claim): reads the
-- next p_chunk jobs of the tick (p_lo, p_hi) after the position (p_px,
-- p_pi) (actor_worker_lane_jobs) and picks those the claim takes (`ids`,
-- `xids`, in lane order: up to p_want, within p_max_bytes of args and
-- metadata but at least one when p_first) and those that go off the lane
-- (`off`), to be claimed as rows: not due, keyed, not 'available', of a
-- kind p_kinds (NULL: any) lacks (`alien`: their kinds), or of a limited
-- queue (p_all_off). `seen`: how many it read (fewer than p_chunk: the
-- tick is used up); `stop`: it stopped at a job it could take but had no
-- room for; `px`, `pi`: the last job it read; `slot_from`, `slot_to`:
-- the lowest and highest ring slot that holds a picked job.
-- It returns no column of the jobs it picks: once the `off` jobs left the
-- lane, the picked ones are the next cardinality(ids) jobs of the lane
-- after the same position, and the claim reads them again straight into
-- its result. Carrying their args, kinds and metadata through arrays cost
-- more than reading them twice (a claim of 1,800 jobs: measured in
-- bench/results/2026-12-04-claim-reads-twice.txt).
-- Due means run_at <= clock_timestamp(), not now(): the tick's snapshot is
-- taken after the claim's transaction began, so it sees jobs of
-- transactions that began later, whose run_at (their now()) is after the
-- claim's now(); judged by now(), every such job looked scheduled and went
-- off the lane (a steady producer moved most of its jobs off).
CREATE OR REPLACE FUNCTION actor_worker_lane_pick(
  p_queue text, p_priority integer, p_lo pg_snapshot, p_hi pg_snapshot,
  p_px xid8, p_pi bigint, p_chunk integer, p_want integer, p_max_bytes bigint,
  p_first boolean, p_kinds text[], p_all_off boolean)
RETURNS TABLE (seen bigint, stop boolean, ids bigint[], xids xid8[],
               bytes bigint, off bigint[], alien text[], px xid8, pi bigint,
               slot_from smallint, slot_to smallint)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  -- (The rows come in lane order, and the aggregates keep it.)
  SELECT count(*), coalesce(bool_or(t.ok AND NOT t.take), false),
         array_agg(t.id) FILTER (WHERE t.take),
         array_agg(t.ready_xid) FILTER (WHERE t.take),
         coalesce(sum(t.bytes) FILTER (WHERE t.take), 0)::bigint,
         array_agg(t.id) FILTER (WHERE NOT t.ok),
         array_agg(t.kind) FILTER (WHERE t.alien),
         (array_agg(t.ready_xid))[count(*)], (array_agg(t.id))[count(*)],
         min(t.slot) FILTER (WHERE t.take), max(t.slot) FILTER (WHERE t.take)
    FROM (SELECT w.*, w.ok AND w.n <= p_want
                      AND (w.b <= p_max_bytes OR (w.n = 1 AND p_first)) AS take
            FROM (SELECT x.*, count(*) FILTER (WHERE x.ok) OVER o AS n,
                         sum(x.bytes) FILTER (WHERE x.ok) OVER o AS b
                    FROM (SELECT y.ready_xid, y.id, y.kind, y.bytes, y.slot,
                                 (p_kinds IS NOT NULL AND NOT (y.kind = ANY (p_kinds))) AS alien,
                                 (y.state = 'available' AND y.run_at <= clock_timestamp()
                                  AND y.ordering_key IS NULL AND y.unique_key IS NULL
                                  AND y.attempt < 999999 AND NOT p_all_off
                                  AND (p_kinds IS NULL OR y.kind = ANY (p_kinds))) AS ok
                            FROM actor_worker_lane_jobs(p_queue, p_priority, p_lo, p_hi,
                                                        p_px, p_pi, p_chunk,
                                                        (-32768)::smallint, 32767::smallint) AS y) AS x
                  WINDOW o AS (ORDER BY x.ready_xid, x.id)) AS w) AS t;
END
$$;


-- -- actor_worker_claimed_lane_jobs -----------------------------------

-- The jobs of lane batch p_lease (actor_worker_lane_batch) as the claim
-- returns them (actor_worker_claim's columns): the next p_count jobs of
-- the tick (p_lo, p_hi) after (p_after_xid, p_after_id), read again
-- straight into the result from the ring slots p_slot_from to p_slot_to
-- that hold them. The batch picked them by id alone and moved off the lane
-- the jobs between them it did not take, so they are exactly the next
-- p_count; the lane's claim lock kept them there. Carrying their args,
-- kinds and metadata through arrays cost more than reading them twice (a
-- claim of 1,800 jobs: bench/results/2026-12-04-claim-reads-twice.txt).
-- p_observed: the kinds whose hooks see the running job's row (event_row).
CREATE OR REPLACE FUNCTION actor_worker_claimed_lane_jobs(
  p_queue text, p_priority integer, p_worker text, p_observed text[],
  p_lease bigint, p_lo pg_snapshot, p_hi pg_snapshot, p_after_xid xid8,
  p_after_id bigint, p_count integer, p_slot_from smallint,
  p_slot_to smallint)
RETURNS TABLE (lease bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text, note jsonb)
LANGUAGE plpgsql
AS $$
DECLARE
  v_read bigint;
BEGIN
  RETURN QUERY
  SELECT p_lease, u.id, u.kind, u.args, p_priority, u.attempt + 1,
         u.error_count, coalesce(u.max_attempts, 0), u.metadata,
         coalesce(u.deadline_ms, 0),
         CASE WHEN u.kind = ANY (p_observed) THEN actor_worker_job_json(u.id,
           jsonb_build_object('state', 'running', 'attempt', u.attempt + 1,
                              'locked_by', p_worker, 'locked_at', now())) END,
         NULL::jsonb
    FROM actor_worker_lane_jobs(p_queue, p_priority, p_lo, p_hi, p_after_xid,
                                p_after_id, p_count, p_slot_from, p_slot_to) AS u;
  GET DIAGNOSTICS v_read = ROW_COUNT;
  IF v_read <> p_count THEN
    RAISE EXCEPTION 'claim: % lane jobs picked, % read again', p_count, v_read;
  END IF;
END
$$;
