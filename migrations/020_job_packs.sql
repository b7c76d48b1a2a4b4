-- 020_job_packs: packed lane jobs, for bulk enqueues of 300,000 jobs/s.
--
-- A lane row costs its insert: about 90,000 jobs/s from one client through
-- enqueue_many on a 2-core machine, and no row per job, however narrow,
-- passes 300,000 there (bench/results/2026-12-01-enqueue-cost.md). A pack
-- is one row holding a whole batch of lane jobs: their kinds and args as
-- arrays, their ids as one block (bench/results/2026-12-02-packed-enqueue.md:
-- 341,000-440,000 jobs/s from one client).
--
-- A pack is a piece of a lane. Its jobs are lane entries with the keys
-- (ready_xid, first_id), (ready_xid, first_id + 1), ...: the claim takes
-- them in key order with the lane's other rows, a batch's range covers
-- them, a completion is a receipt as for any lane job. Only a job whose
-- state changes otherwise (it failed, was released, its batch expired, it
-- was set aside, an admin command touches it) needs a row of its own: it
-- is first *unpacked* (actor_worker_unpack) into a job_rows lane row with
-- the same key, and from there every statement works on it as before.
-- Readers skip unpacked entries, so nothing is seen twice.
--
-- Packed jobs are listed by the view packed_jobs (the columns of jobs);
-- `jobs` lists job_rows only, so its lookups stay index lookups. An
-- unpacked job leaves packed_jobs and shows in jobs. A pack goes once all
-- its jobs finished longer ago than the retention (cleanup_lanes).
--
-- Packs are opt-in (enqueue_many's packed option): nothing else writes
-- them.

-- Packed job ids: one block of 1024 per pack, far above jobs_id_seq's
-- range (2^52), aligned so that an id names its pack: id - id % 1024.
-- Below 2^53, so ids stay exact in JSON numbers.
CREATE SEQUENCE job_pack_blocks START 4503599627370496 INCREMENT 1024
  MINVALUE 4503599627370496;

-- True for the id of a packed job.
CREATE FUNCTION actor_worker_packed(p_id bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT p_id >= 4503599627370496
$$;

-- Each job of a pack is checked as job_rows checks its row (001, 007):
-- the kind not empty, at most 200 bytes, no control character; args a
-- JSON object.
CREATE FUNCTION actor_worker_pack_checked(p_kinds text[], p_args jsonb[])
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT NOT EXISTS (
    SELECT 1 FROM unnest(p_kinds, p_args) AS e(kind, args)
     WHERE e.kind IS NULL OR e.kind = '' OR octet_length(e.kind) > 200
        OR e.kind ~ '[[:cntrl:]]' OR e.args IS NULL
        OR jsonb_typeof(e.args) <> 'object')
$$;

CREATE TABLE job_packs (
  -- The first job's id (job_pack_blocks); the pack's jobs are first_id ..
  -- first_id + n - 1.
  first_id   bigint      PRIMARY KEY
                         CHECK (first_id % 1024 = 0
                                AND actor_worker_packed(first_id)),
  queue      text        NOT NULL
                         CHECK (queue <> '' AND octet_length(queue) <= 200
                                AND queue !~ '[[:cntrl:]]'),
  priority   integer     NOT NULL DEFAULT 0,
  -- The lane key's first part, as job_rows.ready_xid.
  ready_xid  xid8        NOT NULL DEFAULT pg_current_xact_id(),
  n          integer     NOT NULL CHECK (n BETWEEN 1 AND 1024),
  kinds      text[]      NOT NULL,
  args       jsonb[]     NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Jobs of the pack that were unpacked into job_rows (and are no longer
  -- the pack's to show or claim).
  unpacked   bigint[]    NOT NULL DEFAULT '{}',
  CHECK (cardinality(kinds) = n AND cardinality(args) = n),
  CHECK (actor_worker_pack_checked(kinds, args))
);
CREATE INDEX job_packs_lane_idx ON job_packs (queue, priority, ready_xid, first_id);

-- One NOTIFY per statement and queue, as for job_rows (001).
CREATE FUNCTION actor_worker_notify_packed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('actor_worker_jobs', q.queue)
     FROM (SELECT DISTINCT queue FROM inserted_packs) AS q;
  RETURN NULL;
END
$$;
CREATE TRIGGER job_packs_notify_inserted
  AFTER INSERT ON job_packs
  REFERENCING NEW TABLE AS inserted_packs
  FOR EACH STATEMENT EXECUTE FUNCTION actor_worker_notify_packed();

-- Job p_o (1-based) of pack p, as a job_rows row (a lane row's defaults
-- for every column a pack does not store); actor_worker_pack_rows: the
-- jobs still in pack p, in key order. args_bytes is
-- the args' stored size, not their length as text: what bounds a claim's
-- memory, without rendering every job's args each time a pack is read.
CREATE FUNCTION actor_worker_pack_entry(p job_packs, p_o bigint, p_kind text,
                                        p_args jsonb)
RETURNS job_rows
LANGUAGE sql IMMUTABLE AS $$
  SELECT p.first_id + p_o - 1, p_kind, p.queue, p_args, 'available'::text,
         p.priority, p.created_at, p.created_at, 0, 0, NULL::integer,
         NULL::text, NULL::timestamptz, NULL::text, NULL::timestamptz,
         NULL::timestamptz, '{}'::jsonb, '{}'::text[], NULL::bigint,
         NULL::timestamptz, NULL::uuid, NULL::timestamptz, NULL::jsonb,
         NULL::text, NULL::text, NULL::text[], p.ready_xid,
         pg_column_size(p_args) + 2, NULL::integer
$$;

CREATE FUNCTION actor_worker_pack_rows(p job_packs) RETURNS SETOF job_rows
LANGUAGE sql STABLE AS $$
  SELECT r.*
    FROM unnest(p.kinds, p.args) WITH ORDINALITY AS e(kind, args, o),
         LATERAL actor_worker_pack_entry(p, e.o, e.kind, e.args) AS r
   WHERE cardinality(p.unpacked) = 0
      OR NOT (p.first_id + e.o - 1 = ANY (p.unpacked))
   ORDER BY e.o
$$;

-- Gives each packed job of p_ids still in its pack a job_rows lane row
-- with the same key (queue, priority, ready_xid, id), in the current lane
-- generation, and takes it out of the pack. Returns how many. Ids of
-- unpacked or not packed jobs are ignored, so callers pass every id they
-- are about to change. Packs are locked in first_id order.
CREATE FUNCTION actor_worker_unpack(p_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  p job_packs;
  v_ids bigint[];
  v_count integer := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM unnest(p_ids) AS i WHERE actor_worker_packed(i)) THEN
    RETURN 0;
  END IF;
  FOR p IN
    SELECT * FROM job_packs AS x
     WHERE x.first_id IN (SELECT DISTINCT i - i % 1024 FROM unnest(p_ids) AS i
                           WHERE actor_worker_packed(i))
     ORDER BY x.first_id
       FOR UPDATE
  LOOP
    SELECT array_agg(r.id) INTO v_ids FROM actor_worker_pack_rows(p) AS r
     WHERE r.id = ANY (p_ids);
    CONTINUE WHEN v_ids IS NULL;
    INSERT INTO job_rows (id, kind, queue, args, state, priority, run_at,
                          created_at, ready_xid, lane_gen)
    SELECT r.id, r.kind, r.queue, r.args, 'available', r.priority, r.run_at,
           r.created_at, r.ready_xid,
           (SELECT max(g.gen) FROM lane_generations AS g)
      FROM actor_worker_pack_rows(p) AS r
     WHERE r.id = ANY (v_ids);
    UPDATE job_packs AS x SET unpacked = x.unpacked || v_ids
     WHERE x.first_id = p.first_id;
    v_count := v_count + cardinality(v_ids);
  END LOOP;
  RETURN v_count;
END
$$;

-- The lane keys of queue/priority packed past (p_xid, p_id) and below the
-- fence, in order, at most p_want: what the claim's lane scan takes from
-- packs (with each job's size and kind, as it reads them from job_rows).
-- A pack holding keys past the cursor starts less than a block before it.
CREATE FUNCTION actor_worker_pack_keys(
  p_queue text, p_priority integer, p_xid xid8, p_id bigint, p_fence xid8,
  p_want integer)
RETURNS TABLE (ready_xid xid8, id bigint, bytes bigint, kind text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  p job_packs;
  v_got integer := 0;
  v_n integer;
BEGIN
  FOR p IN
    SELECT * FROM job_packs AS x
     WHERE x.queue = p_queue AND x.priority = p_priority
       AND (x.ready_xid, x.first_id) > (p_xid, p_id - 1024)
       AND x.ready_xid < p_fence
     ORDER BY x.ready_xid, x.first_id
  LOOP
    -- (Only the jobs past the cursor are read: a claim often takes the
    -- rest of the pack the last one began.)
    RETURN QUERY
    SELECT p.ready_xid, p.first_id + e.o - 1, pg_column_size(e.args) + 2::bigint,
           e.kind
      FROM unnest(p.kinds, p.args) WITH ORDINALITY AS e(kind, args, o)
     WHERE e.o >= CASE WHEN p.ready_xid = p_xid AND p.first_id <= p_id
                       THEN p_id - p.first_id + 2 ELSE 1 END
       AND (cardinality(p.unpacked) = 0
            OR NOT (p.first_id + e.o - 1 = ANY (p.unpacked)))
     LIMIT p_want - v_got;  -- (unnest gives them in order: no sort)
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_got := v_got + v_n;
    EXIT WHEN v_got >= p_want;
  END LOOP;
END
$$;

-- True when a pack of queue/priority holds jobs with keys in the range
-- (lo, hi]. Packs are ordered and a block apart: of those starting less
-- than a block before lo, only the first can end before lo, and the second
-- starts past it, so two probes decide.
CREATE FUNCTION actor_worker_packs_overlap(
  p_queue text, p_priority integer, p_lo_xid xid8, p_lo_id bigint,
  p_hi_xid xid8, p_hi_id bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  -- (PL/pgSQL, not SQL: its plan is kept for the session; a SQL function
  -- called from PL/pgSQL would be planned at every call.)
  RETURN EXISTS (
    SELECT 1 FROM (SELECT x.first_id, x.n, x.ready_xid FROM job_packs AS x
                    WHERE x.queue = p_queue AND x.priority = p_priority
                      AND (x.ready_xid, x.first_id) > (p_lo_xid, p_lo_id - 1024)
                    ORDER BY x.ready_xid, x.first_id LIMIT 2) AS k
     WHERE (k.ready_xid, k.first_id + k.n - 1) > (p_lo_xid, p_lo_id)
       AND (k.ready_xid, k.first_id) <= (p_hi_xid, p_hi_id));
END
$$;

-- True when a pack of queue/priority holds keys past (p_xid, p_id).
CREATE FUNCTION actor_worker_packed_past(
  p_queue text, p_priority integer, p_xid xid8, p_id bigint)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN actor_worker_packs_overlap(p_queue, p_priority, p_xid, p_id,
                                    '18446744073709551615',
                                    9223372036854775807);
END
$$;

-- The packs of queue/priority holding keys in (lo, hi], in order. (Walks
-- the lane index from lo and stops at the first pack past hi: a bound on
-- both ends as row comparisons would walk the rest of the lane.)
CREATE FUNCTION actor_worker_packs_between(
  p_queue text, p_priority integer, p_lo_xid xid8, p_lo_id bigint,
  p_hi_xid xid8, p_hi_id bigint)
RETURNS SETOF job_packs
LANGUAGE plpgsql STABLE AS $$
DECLARE
  p job_packs;
BEGIN
  FOR p IN
    SELECT * FROM job_packs AS x
     WHERE x.queue = p_queue AND x.priority = p_priority
       AND (x.ready_xid, x.first_id) > (p_lo_xid, p_lo_id - 1024)
     ORDER BY x.ready_xid, x.first_id
  LOOP
    EXIT WHEN (p.ready_xid, p.first_id) > (p_hi_xid, p_hi_id);
    CONTINUE WHEN (p.ready_xid, p.first_id + p.n - 1) <= (p_lo_xid, p_lo_id);
    RETURN NEXT p;
  END LOOP;
END
$$;

-- 019's actor_worker_batch_rows, under a new name: batch b's job_rows.
CREATE FUNCTION actor_worker_batch_lane_rows(b claim_batches)
RETURNS SETOF job_rows LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF b.lo_xid = b.hi_xid THEN
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.lo_xid
       AND r.id > b.lo_id AND r.id <= b.hi_id
     ORDER BY r.ready_xid, r.id;
  ELSE
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.lo_xid
       AND r.id > b.lo_id
     ORDER BY r.ready_xid, r.id;
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL
       AND r.ready_xid > b.lo_xid AND r.ready_xid < b.hi_xid
     ORDER BY r.ready_xid, r.id;
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.hi_xid
       AND r.id <= b.hi_id
     ORDER BY r.ready_xid, r.id;
  END IF;
END
$$;

-- The lane rows and packed jobs in batch b's range, in claim order.
CREATE OR REPLACE FUNCTION actor_worker_batch_rows(b claim_batches)
RETURNS SETOF job_rows LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF NOT actor_worker_packs_overlap(b.queue, b.priority, b.lo_xid, b.lo_id,
                                    b.hi_xid, b.hi_id) THEN
    RETURN QUERY SELECT * FROM actor_worker_batch_lane_rows(b);
    RETURN;
  END IF;
  RETURN QUERY
  SELECT u.* FROM (
    SELECT * FROM actor_worker_batch_lane_rows(b)
    UNION ALL
    SELECT r.* FROM actor_worker_packs_between(b.queue, b.priority, b.lo_xid,
                                               b.lo_id, b.hi_xid, b.hi_id) AS p,
                    actor_worker_pack_rows(p) AS r
     WHERE (r.ready_xid, r.id) > (b.lo_xid, b.lo_id)
       AND (r.ready_xid, r.id) <= (b.hi_xid, b.hi_id)) AS u
   ORDER BY u.ready_xid, u.id;
END
$$;

-- The packed jobs of batch b, as actor_worker_batch_jobs returns them
-- (and their ready_xid), in claim order: the packs come in order and each
-- unnests in order. A packed job's event row is made from its pack (what
-- `jobs` shows for a lane job of an open batch) rather than looked up.
CREATE FUNCTION actor_worker_batch_packed(
  b claim_batches, p_default_deadline_ms bigint, p_observed text[])
RETURNS TABLE (batch_id bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text, ready_xid xid8)
LANGUAGE sql STABLE AS $$
  SELECT b.id, p.first_id + e.o - 1, e.kind, e.args::text, p.priority,
         1, 0, 0, '{}', p_default_deadline_ms,
         CASE WHEN e.kind = ANY (p_observed)
              THEN (actor_worker_row_json(
                      actor_worker_pack_entry(p, e.o, e.kind, e.args))
                    || jsonb_build_object('state', 'running', 'attempt', 1,
                                          'locked_by', b.worker,
                                          'locked_at', b.heartbeat_at))::text
         END,
         p.ready_xid
    FROM actor_worker_packs_between(b.queue, b.priority, b.lo_xid, b.lo_id,
                                    b.hi_xid, b.hi_id) AS p,
         unnest(p.kinds, p.args) WITH ORDINALITY AS e(kind, args, o)
   WHERE (p.ready_xid, p.first_id + e.o - 1) > (b.lo_xid, b.lo_id)
     AND (p.ready_xid, p.first_id + e.o - 1) <= (b.hi_xid, b.hi_id)
     AND (cardinality(p.unpacked) = 0
          OR NOT (p.first_id + e.o - 1 = ANY (p.unpacked)))
$$;

-- The jobs of a claimed batch, as 004's, packed jobs included.
CREATE OR REPLACE FUNCTION actor_worker_batch_jobs(
  p_batch bigint, p_default_deadline_ms bigint, p_observed text[])
RETURNS TABLE (batch_id bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  b claim_batches;
  v_n integer;
  v_p integer;
BEGIN
  SELECT * INTO b FROM claim_batches AS x WHERE x.id = p_batch;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF actor_worker_packs_overlap(b.queue, b.priority, b.lo_xid, b.lo_id,
                                b.hi_xid, b.hi_id) THEN
    -- The batch's packed jobs, and its lane rows (a packed job unpacked
    -- since is one), in claim order: merged only when there are both (a
    -- batch of packed jobs alone is in order as it comes).
    IF NOT EXISTS (SELECT 1 FROM actor_worker_batch_lane_rows(b) AS r
                    WHERE r.state = 'available') THEN
      RETURN QUERY
      SELECT u.batch_id, u.id, u.kind, u.args, u.priority, u.attempt,
             u.error_count, u.max_attempts, u.metadata, u.deadline_ms,
             u.event_row
        FROM actor_worker_batch_packed(b, p_default_deadline_ms, p_observed) AS u;
    ELSE
      RETURN QUERY
      SELECT u.batch_id, u.id, u.kind, u.args, u.priority, u.attempt,
             u.error_count, u.max_attempts, u.metadata, u.deadline_ms,
             u.event_row
        FROM (SELECT p_batch, r.id, r.kind, r.args::text, r.priority,
                     r.attempt + 1, r.error_count, coalesce(r.max_attempts, 0),
                     r.metadata::text,
                     coalesce(r.deadline_ms, p_default_deadline_ms),
                     CASE WHEN r.kind = ANY (p_observed)
                          THEN (SELECT to_jsonb(j)::text FROM jobs AS j
                                 WHERE j.id = r.id) END,
                     r.ready_xid
                FROM actor_worker_batch_lane_rows(b) AS r
               WHERE r.state = 'available'
              UNION ALL
              SELECT * FROM actor_worker_batch_packed(b, p_default_deadline_ms,
                                                      p_observed))
             AS u (batch_id, id, kind, args, priority, attempt, error_count,
                   max_attempts, metadata, deadline_ms, event_row, ready_xid)
       ORDER BY u.ready_xid, u.id;
    END IF;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_p := v_n;
  ELSIF b.lo_xid = b.hi_xid THEN
    -- (The range of actor_worker_batch_rows, written out: one layer of
    -- function results fewer on the hot path.)
    RETURN QUERY
    SELECT p_batch, r.id, r.kind, r.args::text, r.priority, r.attempt + 1,
           r.error_count, coalesce(r.max_attempts, 0), r.metadata::text,
           coalesce(r.deadline_ms, p_default_deadline_ms),
           CASE WHEN r.kind = ANY (p_observed)
                THEN (SELECT to_jsonb(j)::text FROM jobs AS j
                       WHERE j.id = r.id) END
      FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.lo_xid
       AND r.id > b.lo_id AND r.id <= b.hi_id AND r.state = 'available'
     ORDER BY r.ready_xid, r.id;
  ELSE
    RETURN QUERY
    SELECT p_batch, r.id, r.kind, r.args::text, r.priority, r.attempt + 1,
           r.error_count, coalesce(r.max_attempts, 0), r.metadata::text,
           coalesce(r.deadline_ms, p_default_deadline_ms),
           CASE WHEN r.kind = ANY (p_observed)
                THEN (SELECT to_jsonb(j)::text FROM jobs AS j
                       WHERE j.id = r.id) END
      FROM actor_worker_batch_lane_rows(b) AS r
     WHERE r.state = 'available';
  END IF;
  IF v_p IS NULL THEN
    GET DIAGNOSTICS v_n = ROW_COUNT;
  END IF;
  IF v_n < b.size THEN
    UPDATE claim_batches AS cb
       SET remaining = cb.remaining - (b.size - v_n),
           closed_at = CASE WHEN cb.remaining - (b.size - v_n) <= 0
                            THEN now() END
     WHERE cb.id = p_batch AND cb.remaining = b.size AND cb.closed_at IS NULL;
  END IF;
END
$$;
-- The claim of 017, reading packs too (marked 020).
CREATE OR REPLACE FUNCTION actor_worker_claim(
  p_queue text, p_worker text, p_limit integer, p_max_bytes bigint,
  p_default_deadline_ms bigint, p_observed text[], p_fence_wait_ms integer,
  p_kinds text[] DEFAULT NULL)
RETURNS TABLE (batch_id bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_want    integer := p_limit;
  v_bytes   bigint := 0;
  v_prio    integer;
  v_slow    boolean;
  v_n       bigint;
  v_cur     claim_cursors;
  v_fence   xid8;
  v_batch   bigint;
  v_waiting boolean := false;
  v_byte_bound boolean := false;
  v_size    bigint;
  v_taken_bytes bigint;
  a_xid xid8[]; a_bytes bigint[];
  a_id bigint[]; a_kind text[]; a_args text[]; a_attempt integer[];
  a_errors integer[]; a_max integer[]; a_meta text[]; a_deadline bigint[];
  a_event text[];
  a_lane_kind text[];
  a_skip bigint[];
  v_packed  boolean;
  v_skipped integer;
  v_skip_bytes bigint;
  -- The queue's controls (013).
  v_ctl      queue_controls;
  v_limits   boolean := false;
  v_allowed  bigint;
  v_held     bigint;
  v_started  bigint;
  v_oldest   timestamptz;
  v_now      timestamptz;
  v_taken    bigint;
  v_retry_ms bigint;
BEGIN
  -- Controls first: one primary-key read. A queue without a row, or whose
  -- row is neither paused nor limited, claims as 008's claim did.
  SELECT * INTO v_ctl FROM queue_controls AS q WHERE q.queue = p_queue;
  IF FOUND AND (v_ctl.paused OR v_ctl.global_concurrency IS NOT NULL
                OR v_ctl.rate_limit IS NOT NULL) THEN
    IF NOT v_ctl.paused THEN
      IF p_limit <= 0 THEN
        RETURN;
      END IF;
      -- Limited: claims of this queue take turns here until they commit.
      SELECT * INTO v_ctl FROM queue_controls AS q
       WHERE q.queue = p_queue FOR UPDATE;
    END IF;
    IF v_ctl.paused THEN
      -- Reported even with p_limit 0: a poller with a full buffer asks.
      RETURN QUERY SELECT NULL::bigint, NULL::bigint, 'paused'::text,
                          NULL::text, NULL::integer, NULL::integer,
                          NULL::integer, NULL::integer, NULL::text,
                          NULL::bigint, NULL::text;
      RETURN;
    END IF;
    v_limits := true;
    v_allowed := p_limit;
    IF v_ctl.global_concurrency IS NOT NULL THEN
      -- Held now: the unfinished jobs of open lane batches and the running
      -- row-per-state jobs. (A lane job that failed is counted in both
      -- until its batch closes: over, never under.)
      SELECT coalesce(sum(b.remaining), 0) INTO v_held
        FROM claim_batches AS b
       WHERE b.closed_at IS NULL AND b.queue = p_queue;
      v_held := v_held + (SELECT count(*) FROM job_rows AS j
                           WHERE j.state = 'running' AND j.queue = p_queue);
      v_allowed := least(v_allowed, v_ctl.global_concurrency - v_held);
    END IF;
    IF v_ctl.rate_limit IS NOT NULL THEN
      -- The clock after the lock: the window of the claims before this
      -- one ended before it.
      v_now := clock_timestamp();
      DELETE FROM queue_starts AS s
       WHERE s.queue = p_queue AND s.started_at <= v_now - v_ctl.rate_period;
      SELECT coalesce(sum(s.jobs), 0), min(s.started_at)
        INTO v_started, v_oldest
        FROM queue_starts AS s WHERE s.queue = p_queue;
      v_allowed := least(v_allowed, v_ctl.rate_limit - v_started);
    END IF;
    -- The claim below takes at most what the limits leave (with nothing
    -- left it takes nothing), and the end of this function says so.
    v_want := greatest(v_allowed, 0);
  ELSIF p_limit <= 0 THEN
    RETURN;
  END IF;

  -- From here to the controls' end: 008's claim as it was, taking v_want.
  FOR v_prio, v_slow IN
    WITH RECURSIVE lane(prio) AS (
      (SELECT r.priority FROM job_rows AS r
        WHERE r.queue = p_queue AND r.ready_xid IS NOT NULL
        ORDER BY r.priority LIMIT 1)
      UNION ALL
      SELECT (SELECT r.priority FROM job_rows AS r
               WHERE r.queue = p_queue AND r.ready_xid IS NOT NULL
                 AND r.priority > lane.prio
               ORDER BY r.priority LIMIT 1)
        FROM lane WHERE lane.prio IS NOT NULL
    ), packed(prio) AS (
      (SELECT x.priority FROM job_packs AS x
        WHERE x.queue = p_queue ORDER BY x.priority LIMIT 1)
      UNION ALL
      SELECT (SELECT x.priority FROM job_packs AS x
               WHERE x.queue = p_queue AND x.priority > packed.prio
               ORDER BY x.priority LIMIT 1)
        FROM packed WHERE packed.prio IS NOT NULL
    ), slow(prio) AS (
      (SELECT r.priority FROM job_rows AS r
        WHERE r.queue = p_queue AND r.ready_xid IS NULL
          AND r.state IN ('available', 'scheduled')
        ORDER BY r.priority LIMIT 1)
      UNION ALL
      SELECT (SELECT r.priority FROM job_rows AS r
               WHERE r.queue = p_queue AND r.ready_xid IS NULL
                 AND r.state IN ('available', 'scheduled')
                 AND r.priority > slow.prio
               ORDER BY r.priority LIMIT 1)
        FROM slow WHERE slow.prio IS NOT NULL
    )
    SELECT p.prio, bool_or(p.slow)
      FROM (SELECT prio, false AS slow FROM lane WHERE prio IS NOT NULL
            UNION ALL
            SELECT prio, false FROM packed WHERE prio IS NOT NULL
            UNION ALL
            SELECT prio, true FROM slow WHERE prio IS NOT NULL) AS p
     GROUP BY p.prio
     ORDER BY p.prio
  LOOP  -- (prios)
    EXIT WHEN v_want <= 0 OR v_bytes >= p_max_bytes;

    -- 1. Row-per-state jobs of this priority, in run_at order.
    IF v_slow THEN
    WITH picked AS (
      SELECT j.id FROM job_rows AS j
       WHERE j.queue = p_queue AND j.priority = v_prio AND j.ready_xid IS NULL
         AND j.state IN ('available', 'scheduled') AND j.run_at <= now()
         AND (p_kinds IS NULL OR j.kind = ANY (p_kinds))
         -- A job with an ordering key waits for every earlier unfinished
         -- job of its key (one being claimed right now is still
         -- 'available' in this snapshot, so two of a key never run at once).
         AND (j.ordering_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM job_rows AS o
                WHERE o.ordering_key = j.ordering_key AND o.id < j.id
                  AND o.state IN ('scheduled', 'available', 'running',
                                  'waiting_external')))
       ORDER BY j.run_at, j.id
       LIMIT v_want
       FOR UPDATE SKIP LOCKED
    ), sized AS (
      SELECT j.id, j.run_at,
             row_number() OVER w AS n,
             sum(j.args_bytes) OVER w AS bytes
        FROM picked JOIN job_rows AS j ON j.id = picked.id
      WINDOW w AS (ORDER BY j.run_at, j.id)
    ), chosen AS (
      SELECT s.id, s.run_at, s.n FROM sized AS s
       WHERE v_bytes + s.bytes <= p_max_bytes OR (s.n = 1 AND v_bytes = 0)
    ), claimed AS (
      UPDATE job_rows AS j
         SET state = 'running', attempt = j.attempt + 1,
             locked_by = p_worker, locked_at = now(), deadline_at = NULL
        FROM chosen
       WHERE j.id = chosen.id
      RETURNING j.*, chosen.n AS pos,
                CASE WHEN j.kind = ANY (p_observed)
                     THEN actor_worker_row_json(j)::text END AS event
    )
    SELECT array_agg(c.id ORDER BY c.pos), array_agg(c.kind ORDER BY c.pos),
           array_agg(c.args::text ORDER BY c.pos),
           array_agg(c.attempt ORDER BY c.pos),
           array_agg(c.error_count ORDER BY c.pos),
           array_agg(c.max_attempts ORDER BY c.pos),
           array_agg(c.metadata::text ORDER BY c.pos),
           array_agg(c.deadline_ms ORDER BY c.pos),
           array_agg(c.event ORDER BY c.pos),
           sum(c.args_bytes)
      INTO a_id, a_kind, a_args, a_attempt, a_errors, a_max, a_meta,
           a_deadline, a_event, v_n
      FROM claimed AS c;
    IF a_id IS NOT NULL THEN
      RETURN QUERY
      SELECT 0::bigint, u.id, u.kind, u.args, v_prio, u.attempt, u.errors,
             coalesce(u.max, 0), u.meta,
             coalesce(u.deadline, p_default_deadline_ms), u.event
        FROM unnest(a_id, a_kind, a_args, a_attempt, a_errors, a_max, a_meta,
                    a_deadline, a_event)
             AS u(id, kind, args, attempt, errors, max, meta, deadline, event);
      v_want := v_want - cardinality(a_id);
      v_bytes := v_bytes + v_n;
    END IF;
    END IF;
    EXIT WHEN v_want <= 0 OR v_bytes >= p_max_bytes;

    -- 2. The lane of this priority. Lane keys are taken in order whatever
    -- their kind; jobs of kinds this worker cannot run (p_kinds) are set
    -- aside on the way: they leave the lane for the row-per-state path,
    -- still 'available', where only workers that run their kind claim
    -- them. The scan then goes on past them while this claim wants more.
    SELECT * INTO v_cur FROM claim_cursors AS c
     WHERE c.queue = p_queue AND c.priority = v_prio;
    IF NOT FOUND THEN
      INSERT INTO claim_cursors (queue, priority) VALUES (p_queue, v_prio)
        ON CONFLICT DO NOTHING;
      SELECT * INTO v_cur FROM claim_cursors AS c
       WHERE c.queue = p_queue AND c.priority = v_prio;
    END IF;
    -- (No fence yet: with no lane key past the cursor, nothing waits.)
    v_fence := NULL;
    <<lane_scan>>
    LOOP
    -- (Every probe of a lane is ORDER BY key LIMIT 1: an EXISTS would be
    -- planned as a sequential scan that walks every claimed row first.)
    PERFORM 1 FROM job_rows AS r
     WHERE r.queue = p_queue AND r.priority = v_prio
       AND r.ready_xid IS NOT NULL
       AND (r.ready_xid, r.id) > (v_cur.last_xid, v_cur.last_id)
     ORDER BY r.ready_xid, r.id LIMIT 1;
    -- (020) Packed keys past the cursor, too.
    v_packed := actor_worker_packed_past(p_queue, v_prio, v_cur.last_xid,
                                         v_cur.last_id);
    EXIT lane_scan WHEN NOT FOUND AND NOT v_packed;
    SELECT * INTO v_cur FROM claim_cursors AS c
     WHERE c.queue = p_queue AND c.priority = v_prio FOR UPDATE;
    -- The fence, once: every transaction with an older id has ended, so all
    -- lane keys below it are in place. (Taken before the scan's own
    -- snapshot, it is the same or older: safe. Written into the scan, it
    -- would be computed again for every row.)
    v_fence := pg_snapshot_xmin(pg_current_snapshot());

    -- From here to the commit, claims of this lane wait for this one: do
    -- only what moves the cursor. The keys past it below the fence, in
    -- order, with their sizes and kinds (the row is read for its
    -- visibility anyway); the batch takes them while the count and byte
    -- limits hold (at least one job when nothing is held yet). The jobs'
    -- args are read after the commit, outside this lock
    -- (actor_worker_batch_jobs).
    -- (020) Without packs past the cursor, as before; a lane of packs
    -- alone takes their keys as they come; a lane of both merges them.
    SELECT array_agg(k.ready_xid), array_agg(k.id), array_agg(k.args_bytes),
           array_agg(k.kind), sum(k.args_bytes)
      INTO a_xid, a_id, a_bytes, a_lane_kind, v_taken_bytes
      FROM (SELECT r.ready_xid, r.id, r.args_bytes, r.kind
              FROM job_rows AS r
             WHERE r.queue = p_queue AND r.priority = v_prio
               AND r.ready_xid IS NOT NULL
               AND (r.ready_xid, r.id) > (v_cur.last_xid, v_cur.last_id)
               AND r.ready_xid < v_fence
             ORDER BY r.ready_xid, r.id
             LIMIT v_want) AS k;
    IF v_packed AND a_id IS NULL THEN
    SELECT array_agg(k.ready_xid), array_agg(k.id), array_agg(k.bytes),
           array_agg(k.kind), sum(k.bytes)
      INTO a_xid, a_id, a_bytes, a_lane_kind, v_taken_bytes
      FROM actor_worker_pack_keys(p_queue, v_prio, v_cur.last_xid,
                                  v_cur.last_id, v_fence, v_want) AS k;
    ELSIF v_packed THEN
    -- (020) The lane's rows and its packed keys, merged in key order.
    SELECT array_agg(k.ready_xid), array_agg(k.id), array_agg(k.bytes),
           array_agg(k.kind), sum(k.bytes)
      INTO a_xid, a_id, a_bytes, a_lane_kind, v_taken_bytes
      FROM (SELECT u.* FROM (
              (SELECT r.ready_xid, r.id, r.args_bytes::bigint AS bytes, r.kind
                 FROM job_rows AS r
                WHERE r.queue = p_queue AND r.priority = v_prio
                  AND r.ready_xid IS NOT NULL
                  AND (r.ready_xid, r.id) > (v_cur.last_xid, v_cur.last_id)
                  AND r.ready_xid < v_fence
                ORDER BY r.ready_xid, r.id
                LIMIT v_want)
              UNION ALL
              SELECT pk.ready_xid, pk.id, pk.bytes, pk.kind
                FROM actor_worker_pack_keys(p_queue, v_prio, v_cur.last_xid,
                                            v_cur.last_id, v_fence, v_want)
                     AS pk) AS u
             ORDER BY u.ready_xid, u.id
             LIMIT v_want) AS k;
    END IF;
    EXIT lane_scan WHEN a_id IS NULL;
    v_n := cardinality(a_id);
    IF v_bytes + v_taken_bytes > p_max_bytes THEN
      -- Big args: the prefix that fits.
      v_byte_bound := true;
      v_n := 0;
      v_taken_bytes := 0;
      FOREACH v_size IN ARRAY a_bytes LOOP
        EXIT WHEN v_bytes + v_taken_bytes + v_size > p_max_bytes
                  AND NOT (v_n = 0 AND v_bytes = 0);
        v_n := v_n + 1;
        v_taken_bytes := v_taken_bytes + v_size;
      END LOOP;
    END IF;
    EXIT lane_scan WHEN v_n = 0;
    v_skipped := 0;
    IF p_kinds IS NOT NULL THEN
      SELECT array_agg(u.id), sum(u.bytes)
        INTO a_skip, v_skip_bytes
        FROM unnest(a_id[1:v_n], a_lane_kind[1:v_n], a_bytes[1:v_n])
             AS u(id, kind, bytes)
       WHERE NOT (u.kind = ANY (p_kinds));
      IF a_skip IS NOT NULL THEN
        v_skipped := cardinality(a_skip);
        v_taken_bytes := v_taken_bytes - v_skip_bytes;
        PERFORM actor_worker_unpack(a_skip);
        UPDATE job_rows AS j SET ready_xid = NULL WHERE j.id = ANY (a_skip);
        -- Told to the caller (one row per kind, the count as id, the kind
        -- as args), and to the workers that may run them.
        RETURN QUERY
        SELECT NULL::bigint, count(*)::bigint, 'set_aside'::text, u.kind,
               v_prio, NULL::integer, NULL::integer, NULL::integer,
               NULL::text, NULL::bigint, NULL::text
          FROM unnest(a_lane_kind[1:v_n]) AS u(kind)
         WHERE NOT (u.kind = ANY (p_kinds))
         GROUP BY u.kind;
        PERFORM pg_notify('actor_worker_jobs', p_queue);
      END IF;
    END IF;
    IF v_n > v_skipped THEN
      INSERT INTO claim_batches (queue, priority, lo_xid, lo_id, hi_xid,
                                 hi_id, worker, size, remaining, bytes)
      VALUES (p_queue, v_prio, v_cur.last_xid, v_cur.last_id, a_xid[v_n],
              a_id[v_n], p_worker, v_n - v_skipped, v_n - v_skipped,
              v_taken_bytes)
      RETURNING claim_batches.id INTO v_batch;
      RETURN QUERY
      SELECT NULL::bigint, v_batch, 'batch'::text, NULL::text, v_prio,
             (v_n - v_skipped)::integer, NULL::integer, NULL::integer,
             NULL::text, NULL::bigint, NULL::text;
    END IF;
    UPDATE claim_cursors AS c
       SET last_xid = a_xid[v_n], last_id = a_id[v_n],
           blocked_fence = NULL, blocked_since = NULL
     WHERE c.queue = p_queue AND c.priority = v_prio;
    v_want := v_want - (v_n - v_skipped);
    v_bytes := v_bytes + v_taken_bytes;
    -- Only jobs set aside make the scan go on: they took room this claim
    -- still has.
    EXIT lane_scan WHEN v_skipped = 0 OR v_want <= 0
                        OR v_bytes >= p_max_bytes;
    SELECT * INTO v_cur FROM claim_cursors AS c
     WHERE c.queue = p_queue AND c.priority = v_prio;
    END LOOP lane_scan;

    -- Due rows of this lane that wait behind an open transaction. (The
    -- same fence as the scan's: a newer one could pass over rows that
    -- became claimable after the scan, and the claim would then report
    -- neither jobs nor a reason to come back soon.)
    IF v_want > 0 AND v_bytes < p_max_bytes THEN
      PERFORM 1 FROM job_rows AS r
       WHERE r.queue = p_queue AND r.priority = v_prio
         AND r.ready_xid IS NOT NULL AND r.ready_xid >= v_fence
       ORDER BY r.ready_xid, r.id LIMIT 1;
      IF NOT FOUND THEN
        PERFORM 1 FROM job_packs AS x
         WHERE x.queue = p_queue AND x.priority = v_prio
           AND x.ready_xid >= v_fence
         ORDER BY x.ready_xid, x.first_id LIMIT 1;
      END IF;
      IF FOUND THEN
        v_waiting := true;
        SELECT * INTO v_cur FROM claim_cursors AS c
         WHERE c.queue = p_queue AND c.priority = v_prio;
        IF v_cur.blocked_fence = v_fence
           AND v_cur.blocked_since
               < now() - p_fence_wait_ms * interval '1 millisecond' THEN
          -- A transaction open this long would hold the lane up for as long
          -- as it stays open: run these jobs on the row-per-state path.
          -- Those of kinds this worker cannot run are set aside by this, so
          -- they are reported as the scan's are (no later claim of this
          -- worker meets them again).
          -- (020) Packed jobs behind the fence get rows first.
          PERFORM actor_worker_unpack(ARRAY(
            SELECT k.id FROM job_packs AS x, actor_worker_pack_rows(x) AS k
             WHERE x.queue = p_queue AND x.priority = v_prio
               AND x.ready_xid >= v_fence
             ORDER BY x.ready_xid, x.first_id, k.id
             LIMIT 1000));
          RETURN QUERY
          WITH moved AS (
            UPDATE job_rows AS j SET ready_xid = NULL
             WHERE j.id IN (SELECT r.id FROM job_rows AS r
                             WHERE r.queue = p_queue AND r.priority = v_prio
                               AND r.ready_xid IS NOT NULL
                               AND r.ready_xid >= v_fence
                             ORDER BY r.ready_xid, r.id
                             LIMIT 1000)
            RETURNING j.kind
          )
          SELECT NULL::bigint, count(*)::bigint, 'set_aside'::text, m.kind,
                 v_prio, NULL::integer, NULL::integer, NULL::integer,
                 NULL::text, NULL::bigint, NULL::text
            FROM moved AS m
           WHERE p_kinds IS NOT NULL AND NOT (m.kind = ANY (p_kinds))
           GROUP BY m.kind;
          IF FOUND THEN
            PERFORM pg_notify('actor_worker_jobs', p_queue);
          END IF;
        ELSIF v_cur.blocked_fence IS DISTINCT FROM v_fence THEN
          UPDATE claim_cursors AS c
             SET blocked_fence = v_fence, blocked_since = now()
           WHERE c.queue = p_queue AND c.priority = v_prio;
        END IF;
      END IF;
    END IF;
  END LOOP;

  IF v_waiting AND v_want > 0 THEN
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, 'waiting'::text,
                        NULL::text, NULL::integer, NULL::integer,
                        NULL::integer, NULL::integer, NULL::text,
                        NULL::bigint, NULL::text;
  END IF;
  IF v_byte_bound THEN
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, 'bytes'::text,
                        NULL::text, NULL::integer, NULL::integer,
                        NULL::integer, NULL::integer, NULL::text,
                        NULL::bigint, NULL::text;
  END IF;

  -- The controls' end (013's, after its claim).
  IF v_limits THEN
    -- v_want was counted down by every job taken (row-per-state, lanes).
    v_taken := greatest(v_allowed, 0) - v_want;
    IF v_taken > 0 AND v_ctl.rate_limit IS NOT NULL THEN
      INSERT INTO queue_starts (queue, started_at, jobs)
      VALUES (p_queue, v_now, v_taken);
      v_oldest := coalesce(v_oldest, v_now);
    END IF;
    -- Cut short by a limit (not by a lack of jobs): the worker comes back.
    -- deadline_ms: in how many ms the rate window frees a start (NULL when
    -- only the concurrency limit binds).
    IF v_allowed < p_limit AND v_taken >= greatest(v_allowed, 0) THEN
      IF v_ctl.rate_limit IS NOT NULL
         AND v_started + v_taken >= v_ctl.rate_limit THEN
        v_retry_ms := greatest(1, ceil(extract(epoch FROM
                        v_oldest + v_ctl.rate_period - clock_timestamp())
                        * 1000))::bigint;
      END IF;
      RETURN QUERY SELECT NULL::bigint, NULL::bigint, 'limited'::text,
                          NULL::text, NULL::integer, NULL::integer,
                          NULL::integer, NULL::integer, NULL::text,
                          v_retry_ms, NULL::text;
    END IF;
  END IF;
END
$$;


-- Outcomes, releases and expired batches as in 018/019; a packed job is
-- unpacked before its row is changed (marked 020).
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
  v_gone   bigint[];
  b        claim_batches;
BEGIN
  FOR v_batch, v_done, v_failed IN
    SELECT o.b, array_agg(o.j) FILTER (WHERE o.done),
           array_agg(o.j) FILTER (WHERE NOT o.done)
      FROM unnest(p_jobs, p_batches, p_done) AS o(j, b, done)
     GROUP BY o.b
     ORDER BY o.b
  LOOP
    SELECT * INTO b FROM claim_batches AS cb
     WHERE cb.id = v_batch AND cb.worker = p_worker AND cb.closed_at IS NULL
       FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    v_count := 0;
    IF v_done IS NOT NULL THEN
      IF p_delete THEN
        WITH gone AS (
          DELETE FROM job_rows AS r
           WHERE r.id = ANY (v_done) AND r.ready_xid IS NOT NULL
             AND r.state = 'available'
          RETURNING r.id)
        SELECT array_agg(gone.id) INTO v_gone FROM gone;
        v_count := v_count + coalesce(cardinality(v_gone), 0);
        -- (020) A packed job has no row to delete: it gets a receipt, and
        -- goes with its pack.
        SELECT array_agg(d) INTO v_done FROM unnest(v_done) AS d
         WHERE actor_worker_packed(d) AND NOT (d = ANY (coalesce(v_gone, '{}')));
      END IF;
      IF v_done IS NOT NULL THEN
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
      -- (020) A packed job gets its row first.
      PERFORM actor_worker_unpack(v_failed);
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
     ORDER BY o.b
  LOOP
    SELECT * INTO b FROM claim_batches AS cb
     WHERE cb.id = v_batch AND cb.worker = p_worker AND cb.closed_at IS NULL
       FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    -- (020) Packed jobs get their rows first.
    PERFORM actor_worker_unpack(v_ids);
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
    -- (020) Packed jobs get their rows first.
    PERFORM actor_worker_unpack(ARRAY(
      SELECT x.id FROM actor_worker_batch_rows(b) AS x
       WHERE x.state = 'available' AND actor_worker_packed(x.id)
         AND x.id NOT IN (SELECT unnest(v_done))));
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

-- Retention of lane rows as in 019, and of packs (marked 020).
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
      v_last := (SELECT max(r.id) FROM actor_worker_pack_rows(p) AS r);
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
      WITH over AS (
        SELECT x.id FROM claim_batches AS x
         WHERE x.queue = l.queue AND x.priority = l.priority
           AND (x.hi_xid, x.hi_id) >= (p.ready_xid, p.first_id)
         ORDER BY x.hi_xid, x.hi_id
         LIMIT p.n + 1
      ), receipted AS MATERIALIZED (
        SELECT d FROM over JOIN batch_completions AS c ON c.batch_id = over.id,
               unnest(c.ids) AS d
         WHERE d BETWEEN p.first_id AND p.first_id + p.n - 1
      )
      SELECT array_agg(r.id) INTO v_lost FROM actor_worker_pack_rows(p) AS r
       WHERE NOT EXISTS (SELECT 1 FROM receipted WHERE receipted.d = r.id);
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

-- The jobs still in pack p as the `jobs` view shows a lane job (004): the
-- state, attempt and lock from the batch that took it. (Of the row type of
-- `jobs`: a later migration that re-creates that view re-creates these.)
CREATE FUNCTION actor_worker_pack_jobs(p job_packs) RETURNS SETOF jobs
LANGUAGE sql STABLE AS $$
SELECT r.id, r.kind, r.queue, r.args,
       CASE WHEN b.id IS NULL THEN r.state
            WHEN c.finalized_at IS NOT NULL THEN 'completed'
            ELSE 'running' END AS state,
       r.priority, r.run_at, r.created_at,
       r.attempt + CASE WHEN b.id IS NULL THEN 0 ELSE 1 END AS attempt,
       r.error_count, r.max_attempts, r.last_error_message, r.last_failed_at,
       CASE WHEN b.id IS NULL THEN r.locked_by ELSE b.worker END AS locked_by,
       CASE WHEN b.id IS NULL THEN r.locked_at ELSE b.heartbeat_at END AS locked_at,
       CASE WHEN b.id IS NULL THEN r.finalized_at ELSE c.finalized_at END AS finalized_at,
       r.metadata, r.tags, r.deadline_ms, r.deadline_at, r.callback_id,
       r.callback_timeout_at, r.callback_result, r.ordering_key, r.unique_key,
       r.unique_states
  FROM actor_worker_pack_rows(p) AS r
  LEFT JOIN LATERAL actor_worker_batch_of(r) AS b ON true
  LEFT JOIN LATERAL (
    SELECT min(bc.finalized_at) AS finalized_at FROM batch_completions AS bc
     WHERE b.id IS NOT NULL AND bc.batch_id = b.id AND r.id = ANY (bc.ids)
  ) AS c ON true
$$;

-- Packed jobs, with the columns and states of `jobs`: what a user reads
-- about a job enqueued packed until it is unpacked (then it is in `jobs`)
-- or its pack goes with the retention. Read-only: to change a packed job,
-- unpack it (SELECT actor_worker_unpack(ARRAY[id])) and change it in
-- `jobs`. A lookup by id here reads every pack; actor_worker_packed_jobs
-- goes to the packs by id.
CREATE VIEW packed_jobs AS
SELECT j.* FROM job_packs AS p CROSS JOIN LATERAL actor_worker_pack_jobs(p) AS j;

-- The packed jobs among p_ids, as packed_jobs shows them, from their packs
-- alone (a job's pack is first_id = id - id % 1024).
CREATE FUNCTION actor_worker_packed_jobs(p_ids bigint[]) RETURNS SETOF jobs
LANGUAGE sql STABLE AS $$
  SELECT j.* FROM job_packs AS p CROSS JOIN LATERAL actor_worker_pack_jobs(p) AS j
   WHERE p.first_id IN (SELECT DISTINCT i - i % 1024 FROM unnest(p_ids) AS i
                         WHERE actor_worker_packed(i))
     AND j.id = ANY (p_ids)
$$;

-- As 019 says: the functions on the hot path plan generically and never
-- JIT; the ones this migration replaced or added get the settings.
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure FROM pg_proc AS p
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proname IN ('actor_worker_claim', 'actor_worker_finish_lane',
                         'actor_worker_batch_jobs', 'actor_worker_batch_rows',
                         'actor_worker_batch_lane_rows',
                         'actor_worker_release_lane',
                         'actor_worker_expire_batches',
                         'actor_worker_cleanup_lanes', 'actor_worker_unpack',
                         'actor_worker_pack_keys',
                         'actor_worker_packs_between',
                         'actor_worker_packs_overlap',
                         'actor_worker_packed_past')
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan',
                   f);
    EXECUTE format('ALTER FUNCTION %s SET jit = off', f);
  END LOOP;
END
$$;
