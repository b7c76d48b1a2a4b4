-- 017_fence_set_aside: lane jobs of other kinds moved off a held-up lane
-- are reported as set aside.
--
-- A transaction holding the commit-order fence past p_fence_wait_ms (the
-- fence is cluster-wide: any transaction with an id in any database of the
-- server, a CREATE DATABASE too) makes the claim move the waiting lane
-- jobs to the row-per-state path. It did so without a 'set_aside' row:
-- jobs of kinds the worker cannot run left its lane unreported, the
-- worker never logged that they wait for another one, and nodes that run
-- them were not woken. The claim of 016 otherwise unchanged.

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
    EXIT lane_scan WHEN NOT FOUND;
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

