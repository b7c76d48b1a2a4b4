-- 013_queue_controls: cluster-wide queue controls: pause, global
-- concurrency, rate limit (README "Queue controls").
--
-- One queue_controls row per queue that has a control or that a worker
-- serves. A queue without a row, or whose row is neither paused nor
-- limited, claims exactly as before: actor_worker_claim reads the row by
-- its primary key and hands over to the claim of 008, now called
-- actor_worker_claim_unlimited. A paused queue claims nothing. A limited
-- queue's claims take turns on its row (FOR UPDATE) and take at most what
-- the limits leave; the lock is held until the claim commits, so the next
-- claim of the queue, on any node, counts the jobs this one took.

CREATE TABLE queue_controls (
  -- The jobs.queue value.
  queue              text        PRIMARY KEY,
  -- No node claims jobs of a paused queue (`actor-worker queues pause`).
  paused             boolean     NOT NULL DEFAULT false,
  -- When the pause began; NULL while not paused.
  paused_at          timestamptz,
  -- At most this many jobs of the queue are held at once across the
  -- cluster (claimed into a worker's buffer, running, or finished with the
  -- outcome not committed yet); NULL = no limit.
  global_concurrency integer     CHECK (global_concurrency >= 1),
  -- At most rate_limit jobs of the queue are claimed per rate_period,
  -- counted over a sliding window; NULL = no limit.
  rate_limit         integer     CHECK (rate_limit >= 1),
  rate_period        interval    CHECK (rate_period IN ('1 second', '1 minute')),
  -- Last change of a limit or of the pause.
  updated_at         timestamptz NOT NULL DEFAULT now(),
  CHECK ((rate_limit IS NULL) = (rate_period IS NULL))
);

-- The claims of rate-limited queues within their window: one row per claim
-- that took jobs (when, how many). Claims delete rows that left the window.
CREATE TABLE queue_starts (
  queue      text        NOT NULL,
  started_at timestamptz NOT NULL,
  jobs       integer     NOT NULL CHECK (jobs >= 1)
);
CREATE INDEX queue_starts_queue_idx ON queue_starts (queue, started_at);

ALTER FUNCTION actor_worker_claim(text, text, integer, bigint, bigint, text[],
                                  integer, text[])
  RENAME TO actor_worker_claim_unlimited;

-- The claim (same parameters and rows as 008's), under the queue's
-- controls. Two more marker rows (batch_id NULL): 'paused' (the queue is
-- paused: nothing was claimed; the worker drops what it buffers of it) and
-- 'limited' (a limit cut this claim short; deadline_ms: in how many ms the
-- rate window frees a start, NULL when only the concurrency limit binds).
-- A paused queue is reported even with p_limit 0, so a worker with a full
-- buffer can ask whether its queue was paused.
CREATE FUNCTION actor_worker_claim(
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
  v_ctl      queue_controls;
  v_allowed  bigint := p_limit;
  v_held     bigint;
  v_started  bigint;
  v_oldest   timestamptz;
  v_now      timestamptz;
  v_taken    integer := 0;
  v_retry_ms bigint;
  r          record;
BEGIN
  SELECT * INTO v_ctl FROM queue_controls AS q WHERE q.queue = p_queue;
  IF NOT FOUND OR (NOT v_ctl.paused AND v_ctl.global_concurrency IS NULL
                   AND v_ctl.rate_limit IS NULL) THEN
    RETURN QUERY
    SELECT * FROM actor_worker_claim_unlimited(
      p_queue, p_worker, p_limit, p_max_bytes, p_default_deadline_ms,
      p_observed, p_fence_wait_ms, p_kinds);
    RETURN;
  END IF;
  IF NOT v_ctl.paused THEN
    IF p_limit <= 0 THEN
      RETURN;
    END IF;
    -- Limited: claims of this queue take turns here until they commit.
    SELECT * INTO v_ctl FROM queue_controls AS q
     WHERE q.queue = p_queue FOR UPDATE;
  END IF;
  IF v_ctl.paused THEN
    RETURN QUERY SELECT NULL::bigint, NULL::bigint, 'paused'::text,
                        NULL::text, NULL::integer, NULL::integer,
                        NULL::integer, NULL::integer, NULL::text,
                        NULL::bigint, NULL::text;
    RETURN;
  END IF;
  IF v_ctl.global_concurrency IS NOT NULL THEN
    -- Held now: the unfinished jobs of open lane batches and the running
    -- row-per-state jobs. (A lane job that failed is counted in both until
    -- its batch closes: over, never under.)
    SELECT coalesce(sum(b.remaining), 0) INTO v_held
      FROM claim_batches AS b
     WHERE b.closed_at IS NULL AND b.queue = p_queue;
    v_held := v_held + (SELECT count(*) FROM job_rows AS j
                         WHERE j.state = 'running' AND j.queue = p_queue);
    v_allowed := least(v_allowed, v_ctl.global_concurrency - v_held);
  END IF;
  IF v_ctl.rate_limit IS NOT NULL THEN
    -- The clock after the lock: the window of the claims before this one
    -- ended before it.
    v_now := clock_timestamp();
    DELETE FROM queue_starts AS s
     WHERE s.queue = p_queue AND s.started_at <= v_now - v_ctl.rate_period;
    SELECT coalesce(sum(s.jobs), 0), min(s.started_at)
      INTO v_started, v_oldest
      FROM queue_starts AS s WHERE s.queue = p_queue;
    v_allowed := least(v_allowed, v_ctl.rate_limit - v_started);
  END IF;
  IF v_allowed > 0 THEN
    FOR r IN
      SELECT * FROM actor_worker_claim_unlimited(
        p_queue, p_worker, v_allowed::integer, p_max_bytes,
        p_default_deadline_ms, p_observed, p_fence_wait_ms, p_kinds)
    LOOP
      IF r.batch_id IS NOT NULL THEN
        v_taken := v_taken + 1;             -- a row-per-state job
      ELSIF r.kind = 'batch' THEN
        v_taken := v_taken + r.attempt;     -- a lane batch of that many
      END IF;
      batch_id := r.batch_id; id := r.id; kind := r.kind; args := r.args;
      priority := r.priority; attempt := r.attempt;
      error_count := r.error_count; max_attempts := r.max_attempts;
      metadata := r.metadata; deadline_ms := r.deadline_ms;
      event_row := r.event_row;
      RETURN NEXT;
    END LOOP;
    IF v_taken > 0 AND v_ctl.rate_limit IS NOT NULL THEN
      INSERT INTO queue_starts (queue, started_at, jobs)
      VALUES (p_queue, v_now, v_taken);
      v_oldest := coalesce(v_oldest, v_now);
    END IF;
  END IF;
  -- Cut short by a limit (not by a lack of jobs): the worker comes back.
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
END
$$;
