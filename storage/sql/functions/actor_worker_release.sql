-- Gives jobs back that worker p_worker holds but will not finish (a
-- graceful stop, a paused queue, a cancelled claim): each becomes due at
-- once off the lanes, without a failure charged. p_batches[i] is the lease
-- of job p_ids[i]. p_started: their handlers ran, so the attempt stays
-- counted; otherwise the attempt is given back. Wakes the queues' workers;
-- returns how many jobs went back.
CREATE OR REPLACE FUNCTION actor_worker_release(
  p_worker text, p_batches bigint[], p_ids bigint[], p_started boolean)
RETURNS bigint
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_moved bigint[];
  v_count bigint;
BEGIN
  -- Lane jobs become running rows of their batch first (as for any outcome
  -- other than a completion), then every row goes back.
  SELECT array_agg(m) INTO v_moved
    FROM actor_worker_materialize(p_worker, p_batches, p_ids) AS m;
  WITH released AS (
    UPDATE jobs_in AS j
       SET state = 'available', batch_id = NULL,
           attempt = greatest(j.attempt - CASE WHEN p_started THEN 0 ELSE 1 END, 0)
      FROM unnest(p_batches, p_ids) AS u(batch, id),
           -- one batch at a time, by its id (as in actor_worker_live_batches)
           LATERAL (SELECT b.id FROM job_batches AS b
                     WHERE b.id = u.batch AND b.worker = p_worker
                       AND b.rescued_at IS NULL
                     LIMIT 1) AS b
     WHERE j.id = u.id AND j.batch_id = u.batch AND j.state = 'running'
    RETURNING j.queue
  ), woken AS (
    SELECT pg_notify('actor_worker_jobs', q.queue)
      FROM (SELECT DISTINCT r.queue FROM released AS r) AS q
  )
  SELECT (SELECT count(*) FROM released) + 0 * (SELECT count(*) FROM woken)
    INTO v_count;
  RETURN v_count;
END
$$;
