-- 004_fast_lane: claims that write nothing per job.
--
-- Until 003 every claim and every completion rewrote the job's row: two
-- non-HOT row versions, new index entries and dead tuples at the head of the
-- claim index per job. Here the rows of plain due jobs stay as they were
-- inserted. A claim advances a cursor over a per-(queue, priority) "lane" of
-- such rows and records one claim_batches row for the whole batch; a
-- completion records one batch_completions row per batch. A job's state is
-- derived from these (the `jobs` view), so readers see what they always saw.
--
-- Everything else (scheduled and retried jobs, ordering keys, unique jobs,
-- failures, callbacks) keeps the row-per-state path of 001-003: a failing
-- job of a batch is first "materialized" as an ordinary running row.
--
-- The base table is job_rows; `jobs` is a view over it with the same columns
-- that accepts INSERT, UPDATE and DELETE, so the SQL contract is unchanged.

ALTER TABLE jobs RENAME TO job_rows;

-- The lane key of a due job: the id of the transaction that made it due
-- (64-bit, never wraps). Rows of a transaction still open sort after every
-- key a claim can have passed: a claim takes only keys below the oldest
-- transaction still running (its snapshot's xmin), so a cursor never skips
-- a job whose enqueue commits late. NULL: the job is on the row-per-state
-- path. Only rows that can run as they are get one (due, 'available', no
-- ordering or unique key): the `jobs` view's rules and the runtime's own
-- writes keep it so, and a claim relies on it. Internal: producers insert
-- through `jobs`.
ALTER TABLE job_rows ADD COLUMN ready_xid xid8;

-- The bytes a claimed job holds in a worker (args and metadata as text),
-- so a claim can bound its bytes from the lane without reading the args.
ALTER TABLE job_rows ADD COLUMN args_bytes integer
  GENERATED ALWAYS AS (octet_length(args::text) + octet_length(metadata::text))
  STORED;

-- A job's row as the `jobs` view shows it (without the internal columns),
-- for events and follow-ups.
CREATE FUNCTION actor_worker_row_json(r job_rows) RETURNS jsonb
LANGUAGE sql STABLE AS $$ SELECT to_jsonb(r) - 'ready_xid' - 'args_bytes' $$;

-- The row-per-state claim now sees only the rows off the lanes.
DROP INDEX jobs_claim_idx;
CREATE INDEX job_rows_claim_idx ON job_rows (queue, priority, run_at, id)
  WHERE state IN ('available', 'scheduled') AND ready_xid IS NULL;
-- The lanes, in claim order. Claimed and completed rows stay in it untouched
-- until retention; a claim descends straight to its cursor.
CREATE INDEX job_rows_lane_idx ON job_rows (queue, priority, ready_xid, id)
  WHERE ready_xid IS NOT NULL;

-- Where the last claim of each lane stopped (exclusive). Claims of a lane
-- take turns on its row (FOR UPDATE). blocked_*: a transaction that has been
-- open for long holds the fence (see actor_worker_claim).
CREATE TABLE claim_cursors (
  queue          text    NOT NULL,
  priority       integer NOT NULL,
  last_xid       xid8    NOT NULL DEFAULT '0',
  last_id        bigint  NOT NULL DEFAULT 0,
  blocked_fence  xid8,
  blocked_since  timestamptz,
  PRIMARY KEY (queue, priority)
) WITH (fillfactor = 50);

-- One row per claim: the lane range (lo, hi] it took, who holds it, how many
-- of its jobs are not finished yet. A job of the range whose row still says
-- 'available' is running while the batch is open, and completed once a
-- batch_completions row of the batch lists it. Heartbeats refresh
-- heartbeat_at (a HOT update: it is not indexed); an open batch whose
-- heartbeat is older than the reclaim window is rescued.
CREATE TABLE claim_batches (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  queue        text        NOT NULL,
  priority     integer     NOT NULL,
  lo_xid       xid8        NOT NULL,
  lo_id        bigint      NOT NULL,
  hi_xid       xid8        NOT NULL,
  hi_id        bigint      NOT NULL,
  worker       text        NOT NULL,
  size         integer     NOT NULL,
  remaining    integer     NOT NULL,
  -- Bytes of args text it took (claims are bounded in bytes too).
  bytes        bigint      NOT NULL DEFAULT 0,
  claimed_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  closed_at    timestamptz
) WITH (fillfactor = 70);
CREATE INDEX claim_batches_range_idx ON claim_batches (queue, priority, hi_xid, hi_id);
CREATE INDEX claim_batches_open_idx ON claim_batches (worker) WHERE closed_at IS NULL;
CREATE INDEX claim_batches_closed_idx ON claim_batches (closed_at) WHERE closed_at IS NOT NULL;

-- The jobs of a batch that completed, one row per batch and commit.
CREATE TABLE batch_completions (
  batch_id     bigint      NOT NULL,
  finalized_at timestamptz NOT NULL DEFAULT now(),
  ids          bigint[]    NOT NULL
);
CREATE INDEX batch_completions_batch_idx ON batch_completions (batch_id);

-- The claim of a lane job is its batch: the one whose range holds its key.
-- Only rows still 'available' on a lane can be in one.
CREATE FUNCTION actor_worker_batch_of(r job_rows)
RETURNS SETOF claim_batches LANGUAGE sql STABLE ROWS 1 AS $$
  SELECT b.* FROM (SELECT * FROM claim_batches AS x
                    WHERE x.queue = r.queue AND x.priority = r.priority
                      AND (x.hi_xid, x.hi_id) >= (r.ready_xid, r.id)
                    ORDER BY x.hi_xid, x.hi_id LIMIT 1) AS b
   WHERE r.ready_xid IS NOT NULL AND r.state = 'available'
     AND (b.lo_xid, b.lo_id) < (r.ready_xid, r.id)
$$;

-- The lane rows in batch b's range (lo, hi], in claim order. Written as
-- index ranges on (xid, id) with plain bounds: a btree scan bounded by row
-- comparisons on both ends positions on the lower one but cannot stop at
-- the upper one, and would walk the rest of the lane.
CREATE FUNCTION actor_worker_batch_rows(b claim_batches)
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

-- The public view: every column of the old table, with state, attempt,
-- locked_by, locked_at and finalized_at derived for lane jobs.
CREATE VIEW jobs AS
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
  FROM job_rows AS r
  LEFT JOIN LATERAL actor_worker_batch_of(r) AS b ON true
  LEFT JOIN LATERAL (
    SELECT min(bc.finalized_at) AS finalized_at FROM batch_completions AS bc
     WHERE b.id IS NOT NULL AND bc.batch_id = b.id AND r.id = ANY (bc.ids)
  ) AS c ON true;

-- Inserting into the view inserts into job_rows with the same defaults.
ALTER VIEW jobs ALTER COLUMN id SET DEFAULT nextval('jobs_id_seq');
ALTER VIEW jobs ALTER COLUMN queue SET DEFAULT 'default';
ALTER VIEW jobs ALTER COLUMN args SET DEFAULT '{}';
ALTER VIEW jobs ALTER COLUMN state SET DEFAULT 'available';
ALTER VIEW jobs ALTER COLUMN priority SET DEFAULT 0;
ALTER VIEW jobs ALTER COLUMN run_at SET DEFAULT now();
ALTER VIEW jobs ALTER COLUMN created_at SET DEFAULT now();
ALTER VIEW jobs ALTER COLUMN attempt SET DEFAULT 0;
ALTER VIEW jobs ALTER COLUMN error_count SET DEFAULT 0;
ALTER VIEW jobs ALTER COLUMN metadata SET DEFAULT '{}';
ALTER VIEW jobs ALTER COLUMN tags SET DEFAULT '{}';

-- A job goes on a lane when it is due at once (run_at left at its default
-- now()), 'available', and has neither ordering nor unique key; anything
-- else takes the row-per-state path. Rules rewrite whole statements, so a
-- bulk INSERT ... SELECT stays one set-based insert (one NOTIFY).
CREATE RULE jobs_insert AS ON INSERT TO jobs DO INSTEAD
INSERT INTO job_rows (id, kind, queue, args, state, priority, run_at,
                      created_at, attempt, error_count, max_attempts,
                      last_error_message, last_failed_at, locked_by, locked_at,
                      finalized_at, metadata, tags, deadline_ms, deadline_at,
                      callback_id, callback_timeout_at, callback_result,
                      ordering_key, unique_key, unique_states, ready_xid)
VALUES (NEW.id, NEW.kind, NEW.queue, NEW.args, NEW.state, NEW.priority,
        NEW.run_at, NEW.created_at, NEW.attempt, NEW.error_count,
        NEW.max_attempts, NEW.last_error_message, NEW.last_failed_at,
        NEW.locked_by, NEW.locked_at, NEW.finalized_at, NEW.metadata, NEW.tags,
        NEW.deadline_ms, NEW.deadline_at, NEW.callback_id,
        NEW.callback_timeout_at, NEW.callback_result, NEW.ordering_key,
        NEW.unique_key, NEW.unique_states,
        CASE WHEN NEW.state = 'available' AND NEW.run_at = now()
                  AND NEW.ordering_key IS NULL AND NEW.unique_key IS NULL
             THEN pg_current_xact_id() END)
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

-- An UPDATE writes the derived columns only when it changes them. A lane
-- job that can no longer run as it is (another state, a later run_at, an
-- ordering or unique key) leaves its lane; one moved to another queue or
-- priority gets a fresh lane key.
CREATE RULE jobs_update AS ON UPDATE TO jobs DO INSTEAD
UPDATE job_rows SET
  id = NEW.id, kind = NEW.kind, queue = NEW.queue, args = NEW.args,
  state = CASE WHEN NEW.state IS DISTINCT FROM OLD.state
               THEN NEW.state ELSE job_rows.state END,
  priority = NEW.priority, run_at = NEW.run_at, created_at = NEW.created_at,
  attempt = CASE WHEN NEW.attempt IS DISTINCT FROM OLD.attempt
                 THEN NEW.attempt ELSE job_rows.attempt END,
  error_count = NEW.error_count, max_attempts = NEW.max_attempts,
  last_error_message = NEW.last_error_message,
  last_failed_at = NEW.last_failed_at,
  locked_by = CASE WHEN NEW.locked_by IS DISTINCT FROM OLD.locked_by
                   THEN NEW.locked_by ELSE job_rows.locked_by END,
  locked_at = CASE WHEN NEW.locked_at IS DISTINCT FROM OLD.locked_at
                   THEN NEW.locked_at ELSE job_rows.locked_at END,
  finalized_at = CASE WHEN NEW.finalized_at IS DISTINCT FROM OLD.finalized_at
                      THEN NEW.finalized_at ELSE job_rows.finalized_at END,
  metadata = NEW.metadata, tags = NEW.tags, deadline_ms = NEW.deadline_ms,
  deadline_at = NEW.deadline_at, callback_id = NEW.callback_id,
  callback_timeout_at = NEW.callback_timeout_at,
  callback_result = NEW.callback_result, ordering_key = NEW.ordering_key,
  unique_key = NEW.unique_key, unique_states = NEW.unique_states,
  ready_xid = CASE WHEN job_rows.ready_xid IS NULL THEN NULL
                   WHEN (NEW.state IS DISTINCT FROM OLD.state
                         AND NEW.state <> 'available')
                        OR NEW.run_at > now()
                        OR NEW.ordering_key IS NOT NULL
                        OR NEW.unique_key IS NOT NULL THEN NULL
                   WHEN NEW.queue IS DISTINCT FROM OLD.queue
                        OR NEW.priority IS DISTINCT FROM OLD.priority
                   THEN pg_current_xact_id()
                   ELSE job_rows.ready_xid END
 WHERE job_rows.id = OLD.id
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

CREATE RULE jobs_delete AS ON DELETE TO jobs DO INSTEAD
DELETE FROM job_rows WHERE job_rows.id = OLD.id
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

-- Claims up to p_limit due jobs of p_queue for p_worker, lowest priority
-- number first, keeping the args of what it returns under p_max_bytes (but
-- at least one job). At each priority it takes the row-per-state jobs first
-- (retries, scheduled jobs come due, ordering keys, unique jobs: one UPDATE
-- each, FOR UPDATE SKIP LOCKED), then the lane: one claim_batches row and a
-- cursor move for the whole batch, nothing written per job.
--
-- The fence: only lane keys below the xmin of the scan's snapshot are taken,
-- so every transaction that could still add a smaller key has ended. When
-- due lane rows are visible but wait behind an open transaction, a last row
-- with a NULL id says so (the caller claims again shortly). When the same
-- transaction has held the fence for p_fence_wait_ms, those rows move to the
-- row-per-state path instead of waiting for it to end.
--
-- Returns the claimed jobs in claim order; batch_id is 0 for row-per-state
-- jobs. event_row is the job's row as JSON (as the `jobs` view shows it)
-- for kinds in p_observed, else NULL.
CREATE FUNCTION actor_worker_claim(
  p_queue text, p_worker text, p_limit integer, p_max_bytes bigint,
  p_default_deadline_ms bigint, p_observed text[], p_fence_wait_ms integer)
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
BEGIN
  IF p_limit <= 0 THEN
    RETURN;
  END IF;
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
  LOOP
    EXIT WHEN v_want <= 0 OR v_bytes >= p_max_bytes;

    -- 1. Row-per-state jobs of this priority, in run_at order.
    IF v_slow THEN
    WITH picked AS (
      SELECT j.id FROM job_rows AS j
       WHERE j.queue = p_queue AND j.priority = v_prio AND j.ready_xid IS NULL
         AND j.state IN ('available', 'scheduled') AND j.run_at <= now()
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

    -- 2. The lane of this priority.
    SELECT * INTO v_cur FROM claim_cursors AS c
     WHERE c.queue = p_queue AND c.priority = v_prio;
    IF NOT FOUND THEN
      INSERT INTO claim_cursors (queue, priority) VALUES (p_queue, v_prio)
        ON CONFLICT DO NOTHING;
      SELECT * INTO v_cur FROM claim_cursors AS c
       WHERE c.queue = p_queue AND c.priority = v_prio;
    END IF;
    -- (Every probe of a lane is ORDER BY key LIMIT 1: an EXISTS would be
    -- planned as a sequential scan that walks every claimed row first.)
    PERFORM 1 FROM job_rows AS r
     WHERE r.queue = p_queue AND r.priority = v_prio
       AND r.ready_xid IS NOT NULL
       AND (r.ready_xid, r.id) > (v_cur.last_xid, v_cur.last_id)
     ORDER BY r.ready_xid, r.id LIMIT 1;
    CONTINUE WHEN NOT FOUND;
    SELECT * INTO v_cur FROM claim_cursors AS c
     WHERE c.queue = p_queue AND c.priority = v_prio FOR UPDATE;
    -- The fence, once: every transaction with an older id has ended, so all
    -- lane keys below it are in place. (Taken before the scan's own
    -- snapshot, it is the same or older: safe. Written into the scan, it
    -- would be computed again for every row.)
    v_fence := pg_snapshot_xmin(pg_current_snapshot());

    -- From here to the commit, claims of this lane wait for this one: do
    -- only what moves the cursor. The keys past it below the fence, in
    -- order, with their sizes (no row is read beyond what its visibility
    -- takes); the batch takes them while the count and byte limits hold
    -- (at least one job when nothing is held yet). The jobs' rows are read
    -- after the commit, outside this lock (actor_worker_batch_jobs).
    SELECT array_agg(k.ready_xid), array_agg(k.id), array_agg(k.args_bytes),
           sum(k.args_bytes)
      INTO a_xid, a_id, a_bytes, v_taken_bytes
      FROM (SELECT r.ready_xid, r.id, r.args_bytes
              FROM job_rows AS r
             WHERE r.queue = p_queue AND r.priority = v_prio
               AND r.ready_xid IS NOT NULL
               AND (r.ready_xid, r.id) > (v_cur.last_xid, v_cur.last_id)
               AND r.ready_xid < v_fence
             ORDER BY r.ready_xid, r.id
             LIMIT v_want) AS k;
    IF a_id IS NOT NULL THEN
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
      IF v_n > 0 THEN
        INSERT INTO claim_batches (queue, priority, lo_xid, lo_id, hi_xid,
                                   hi_id, worker, size, remaining, bytes)
        VALUES (p_queue, v_prio, v_cur.last_xid, v_cur.last_id, a_xid[v_n],
                a_id[v_n], p_worker, v_n, v_n, v_taken_bytes)
        RETURNING claim_batches.id INTO v_batch;
        UPDATE claim_cursors AS c
           SET last_xid = a_xid[v_n], last_id = a_id[v_n],
               blocked_fence = NULL, blocked_since = NULL
         WHERE c.queue = p_queue AND c.priority = v_prio;
        RETURN QUERY
        SELECT NULL::bigint, v_batch, 'batch'::text, NULL::text, v_prio,
               v_n::integer, NULL::integer, NULL::integer, NULL::text,
               NULL::bigint, NULL::text;
        v_want := v_want - v_n;
        v_bytes := v_bytes + v_taken_bytes;
      END IF;
    END IF;

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
          UPDATE job_rows AS j SET ready_xid = NULL
           WHERE j.id IN (SELECT r.id FROM job_rows AS r
                           WHERE r.queue = p_queue AND r.priority = v_prio
                             AND r.ready_xid IS NOT NULL
                             AND r.ready_xid >= v_fence
                           ORDER BY r.ready_xid, r.id
                           LIMIT 1000);
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
END
$$;

-- Records the outcomes of lane jobs run by p_worker (p_jobs[i] of batch
-- p_batches[i]; p_done[i]: it completed). Only batches still open under
-- p_worker count: outcomes of a batch that was rescued or released
-- meanwhile change nothing. Completed jobs are listed in one
-- batch_completions row per batch, or deleted when p_delete (no retention).
-- Any other outcome first turns the job into an ordinary running row (the
-- attempt counted, locked by p_worker), on which the caller then records it
-- the row-per-state way. A batch whose jobs are all finished is closed.
-- p_in_doubt: these outcomes were sent before, and that commit may have
-- happened (the connection broke before its answer): what is recorded
-- already is neither recorded nor counted again. A batch counts only the
-- jobs this call finished, so a batch never closes while one of its jobs
-- is unfinished (a closed batch's unfinished job would look running
-- forever). Returns the batches that were still p_worker's. (Each
-- statement works on one batch, by primary key: joined with the arrays,
-- the planner would hash whole tables.)
CREATE FUNCTION actor_worker_finish_lane(
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
         AND (r.ready_xid, r.id) > (b.lo_xid, b.lo_id)
         AND (r.ready_xid, r.id) <= (b.hi_xid, b.hi_id);
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

-- Puts lane jobs of p_worker's open batches back on their lane without
-- charging an attempt (shutdown, and jobs claimed but never started): a
-- fresh lane key, so the next claim of any worker takes them. p_started:
-- their handlers ran, so the attempt stays counted as started. Wakes the
-- queue's pollers. Returns how many were released.
CREATE FUNCTION actor_worker_release_lane(
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
       AND (r.ready_xid, r.id) > (b.lo_xid, b.lo_id)
       AND (r.ready_xid, r.id) <= (b.hi_xid, b.hi_id);
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

-- Rescue, part one: open batches whose heartbeat is older than the reclaim
-- window (their worker died or lost the database) give their unfinished
-- jobs back as ordinary running rows, locked by that worker since its last
-- heartbeat, and close. The rescue statement that follows in the same
-- transaction charges and reschedules them like any expired lease.
-- SKIP LOCKED: safe on every node at once.
CREATE FUNCTION actor_worker_expire_batches(
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
       AND r.id <> ALL (v_done);
    UPDATE claim_batches SET closed_at = now(), remaining = 0
     WHERE id = b.id;
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- Retention for lane jobs: batches closed longer ago than the retention
-- take their completed rows and receipts with them. Returns the number of
-- job rows deleted.
CREATE FUNCTION actor_worker_cleanup_lanes(
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
       AND (r.ready_xid, r.id) > (b.lo_xid, b.lo_id)
       AND (r.ready_xid, r.id) <= (b.hi_xid, b.hi_id);
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

-- One round trip and one commit for the hot loop: records the completions
-- of lane jobs p_jobs (of batches p_batches; nobody observes their kinds)
-- as actor_worker_finish_lane does, then claims as actor_worker_claim
-- does. Returns the claimed rows, plus one row per batch of p_batches that
-- was still p_worker's (batch_id NULL, id = that batch, kind 'owned').
CREATE FUNCTION actor_worker_finish_and_claim(
  p_worker text, p_jobs bigint[], p_batches bigint[], p_delete boolean,
  p_queue text, p_limit integer, p_max_bytes bigint,
  p_default_deadline_ms bigint, p_observed text[], p_fence_wait_ms integer,
  p_in_doubt boolean DEFAULT false)
RETURNS TABLE (batch_id bigint, id bigint, kind text, args text,
               priority integer, attempt integer, error_count integer,
               max_attempts integer, metadata text, deadline_ms bigint,
               event_row text)
LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(p_jobs) > 0 THEN
    RETURN QUERY
    SELECT NULL::bigint, o, 'owned'::text, NULL::text, NULL::integer,
           NULL::integer, NULL::integer, NULL::integer, NULL::text,
           NULL::bigint, NULL::text
      FROM actor_worker_finish_lane(
             p_worker, p_jobs, p_batches,
             array_fill(true, ARRAY[cardinality(p_jobs)]), p_delete,
             p_in_doubt) AS o;
  END IF;
  RETURN QUERY
  SELECT * FROM actor_worker_claim(p_queue, p_worker, p_limit, p_max_bytes,
                                   p_default_deadline_ms, p_observed,
                                   p_fence_wait_ms);
END
$$;

-- The jobs of lane batch p_batch, read after its claim committed (so the
-- lane's cursor was not held while their args were read), in claim order,
-- as actor_worker_claim returns jobs. A row that left the batch between
-- the claim and this read (cancelled through `jobs` meanwhile) is not
-- returned, and no longer counted as running in the batch.
CREATE FUNCTION actor_worker_batch_jobs(
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
BEGIN
  SELECT * INTO b FROM claim_batches AS x WHERE x.id = p_batch;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  -- (The range of actor_worker_batch_rows, written out: one layer of
  -- function results fewer on the hot path.)
  IF b.lo_xid = b.hi_xid THEN
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
      FROM actor_worker_batch_rows(b) AS r
     WHERE r.state = 'available';
  END IF;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  IF v_n < b.size THEN
    UPDATE claim_batches AS cb
       SET remaining = cb.remaining - (b.size - v_n),
           closed_at = CASE WHEN cb.remaining - (b.size - v_n) <= 0
                            THEN now() END
     WHERE cb.id = p_batch AND cb.remaining = b.size AND cb.closed_at IS NULL;
  END IF;
END
$$;
