-- actor_worker_slot(): the ring slot (0 to 7) that stores a row written
-- now: the slots take turns, each current for the ring's period
-- (job_ring.period, a quarter of the leader's completed_retention, see
-- docs/storage.md). It is the default of jobs.slot, so it runs once per
-- inserted row: it is a plain SQL expression the planner inlines, with the
-- period written into it as a constant by actor_worker_ring_rebuild(),
-- which the leader calls when the period changes (storage/sql/retention.sql:ring_period).
-- A change moves which slot is current at once; rows already written stay
-- where they are, and the ring's recycling (actor_worker_recycle) keeps
-- every row still needed whatever its slot.
CREATE OR REPLACE FUNCTION actor_worker_ring_rebuild(p_seconds bigint)
RETURNS void
LANGUAGE plpgsql
AS $f$
BEGIN
  IF p_seconds < 60 THEN
    RAISE EXCEPTION 'actor_worker_ring_rebuild: a slot period of % s is under one minute', p_seconds;
  END IF;
  EXECUTE format($s$
    CREATE OR REPLACE FUNCTION actor_worker_slot() RETURNS smallint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS 'SELECT (floor(extract(epoch FROM now()) / %s)::bigint %% 8)::smallint'
  $s$, p_seconds);
END
$f$;

DO $$
DECLARE
  v_seconds bigint := 21600;  -- job_ring's initial period: 6 hours
BEGIN
  IF to_regclass('job_ring') IS NOT NULL THEN
    EXECUTE 'SELECT extract(epoch FROM period)::bigint FROM job_ring'
       INTO v_seconds;
  END IF;
  PERFORM actor_worker_ring_rebuild(coalesce(v_seconds, 21600));
END
$$;
