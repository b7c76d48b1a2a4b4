-- The cluster's rescue (the leader runs it each maintenance round): jobs
-- held by a worker that worker_nodes has not seen for p_window_s seconds
-- (or that has no row there), and jobs whose callback timed out. A held
-- job whose handler started (job_starts) and a timed-out one is charged a
-- failed attempt and rescheduled with the retry backoff, or moved to the
-- dead letter queue when it was its last (or when a counter is at its
-- limit: such a row must not stop the rescue). A held job not recorded as
-- started (it waited in its worker's buffer, or started just before the
-- worker died) goes back due and uncharged, with start_unknown set so its
-- next claim records its start first. At most p_limit jobs per call;
-- returns the charged ones with why and what became of them.
--
-- A gone worker's unfinished batches are taken back first
-- (actor_worker_take_back: lane jobs become running rows of their batch,
-- the batch is marked rescued; actor_worker_complete and _materialize lock
-- the batch row against this, a transactional group its advisory lock:
-- actor_worker_try_batch). Then the running rows whose batch was rescued
-- or is gone are charged, or given back if they never started.
CREATE OR REPLACE FUNCTION actor_worker_rescue(
  p_window_s double precision, p_max_retries integer, p_limit integer)
RETURNS TABLE (id bigint, kind text, queue text, reason text, dead boolean,
               message text, row_json text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  v_worker text;
  v_seen   timestamptz;
  b        job_batches;
  j        record;
  v_msg    text;
  v_json   text;
BEGIN
  -- 1. Workers gone: stopped (left_at), silent for the window, or with
  -- batches but no row at all (killed before their first round), their
  -- newest claim older than the window. Of a silent one, the batches
  -- claimed more than the window ago (a lease lasts the window, as a
  -- heartbeat would have renewed it): one that comes back keeps what it
  -- claims after.
  FOR v_worker, v_seen IN
    SELECT n.worker_id, coalesce(n.left_at, 'infinity')
      FROM worker_nodes AS n
     WHERE (n.left_at IS NOT NULL
            OR n.last_seen_at < now() - make_interval(secs => p_window_s))
       AND (n.rescued_at IS NULL
            -- Rescued before, and claimed again since without refreshing
            -- its row (it woke up, claimed, and died before its next
            -- heartbeat round): those claims are taken back too, or they
            -- would stay running for good.
            OR EXISTS (SELECT 1 FROM job_batches AS x
                        WHERE x.worker = n.worker_id AND x.rescued_at IS NULL
                          AND x.finished_at IS NULL))
    UNION ALL
    SELECT w.worker, 'infinity' FROM (
      WITH RECURSIVE w(worker) AS (
        (SELECT x.worker FROM job_batches AS x WHERE x.rescued_at IS NULL
          ORDER BY x.worker LIMIT 1)
        UNION ALL
        SELECT (SELECT x.worker FROM job_batches AS x
                 WHERE x.rescued_at IS NULL AND x.worker > w.worker
                 ORDER BY x.worker LIMIT 1)
          FROM w WHERE w.worker IS NOT NULL)
      SELECT w.worker FROM w WHERE w.worker IS NOT NULL) AS w
     WHERE NOT EXISTS (SELECT 1 FROM worker_nodes AS n WHERE n.worker_id = w.worker)
       AND NOT EXISTS (SELECT 1 FROM job_batches AS x WHERE x.worker = w.worker
                        AND x.claimed_at >= now() - make_interval(secs => p_window_s))
  LOOP
    FOR b IN SELECT * FROM job_batches AS x
              WHERE x.worker = v_worker AND x.rescued_at IS NULL
                AND x.finished_at IS NULL AND x.claimed_at < v_seen
                AND x.claimed_at < now() - make_interval(secs => p_window_s)
                AND actor_worker_try_batch(x.id)
              ORDER BY x.id FOR UPDATE SKIP LOCKED LOOP
      PERFORM actor_worker_take_back(b.id);
    END LOOP;
    UPDATE worker_nodes AS n SET rescued_at = now()
     WHERE n.worker_id = v_worker
       AND (n.left_at IS NOT NULL
            OR n.last_seen_at < now() - make_interval(secs => p_window_s))
       AND NOT EXISTS (SELECT 1 FROM job_batches AS x
                        WHERE x.worker = v_worker AND x.rescued_at IS NULL
                          AND x.finished_at IS NULL
                          AND x.claimed_at >= now() - make_interval(secs => p_window_s));
  END LOOP;

  -- 2. Running rows whose claim was rescued or is gone, and waiting rows
  -- whose callback timed out.
  FOR j IN
    SELECT r.id, r.kind, r.queue, r.batch_id, r.state, r.callback_id,
           r.callback_timeout_at,
           r.error_count, r.max_attempts, r.attempt, x.worker, x.claimed_at,
           -- A claim that is gone (a very old one) may have started it.
           x.id IS NULL OR EXISTS (
             SELECT 1 FROM job_starts AS s
              WHERE s.batch_id = r.batch_id AND r.id = ANY (s.ids)) AS started
      FROM jobs_in AS r
      LEFT JOIN job_batches AS x ON x.id = r.batch_id
     WHERE (r.state = 'running' AND (x.id IS NULL OR x.rescued_at IS NOT NULL))
        OR (r.state = 'waiting_external'
            AND (r.callback_timeout_at IS NULL OR r.callback_timeout_at < now()))
     ORDER BY r.id
     LIMIT p_limit
       FOR UPDATE OF r SKIP LOCKED
  LOOP
    IF j.state = 'running' AND NOT j.started THEN
      -- Claimed, never recorded as started: back uncharged (its attempt
      -- given back), due at once, woken.
      UPDATE jobs_in AS r
         SET state = 'available', attempt = greatest(r.attempt - 1, 0),
             batch_id = NULL, ready_xid = '0', start_unknown = true
       WHERE r.id = j.id;
      PERFORM pg_notify('actor_worker_jobs', j.queue);
      CONTINUE;
    END IF;
    IF j.state = 'waiting_external' THEN
      reason := 'expired_callback';
      v_msg := 'callback expired: no callback for '
               || coalesce(j.callback_id::text, '?')
               || coalesce(' by ' || j.callback_timeout_at, ' (it had no timeout)');
    ELSE
      reason := 'stale_heartbeat';
      v_msg := 'lease expired: worker ' || coalesce(j.worker, '?')
               || CASE WHEN j.worker IS NULL THEN ' (its claim is gone)'
                       ELSE ' stopped heartbeating (claimed at '
                            || j.claimed_at || ')' END;
    END IF;
    dead := j.error_count + 1 >= coalesce(j.max_attempts, p_max_retries + 1)
            OR j.error_count >= 999999;
    IF dead THEN
      v_json := actor_worker_dead_letter(j.id, v_msg);
    ELSE
      UPDATE jobs_in AS r
         SET state = 'scheduled', error_count = r.error_count + 1,
             last_error_message = v_msg, last_failed_at = now(),
             run_at = now() + actor_worker_retry_backoff(r.error_count),
             batch_id = NULL, ready_xid = '0'
       WHERE r.id = j.id
      RETURNING actor_worker_job_json(r.id, jsonb_build_object(
                  'state', 'scheduled', 'error_count', r.error_count,
                  'last_error_message', v_msg, 'last_failed_at', now(),
                  'run_at', r.run_at)) INTO v_json;
    END IF;
    RETURN QUERY SELECT j.id, j.kind, j.queue, reason, dead, v_msg, v_json;
  END LOOP;
END
$$;
