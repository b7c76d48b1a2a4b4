-- Waits at most p_wait_ms for the claim lock of lane (p_queue, p_priority)
-- that another session holds (actor_worker_claim tries it first, without
-- waiting). Returns NULL once the lock is taken, held to the end of the
-- transaction; or, when the wait ran out, who holds it: {"priority",
-- "pid", "application_name", "state", "xact_seconds"}.
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
