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
