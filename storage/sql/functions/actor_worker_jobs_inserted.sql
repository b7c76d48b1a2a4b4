-- Trigger of jobs, once per inserting statement (INSERT or COPY, from any
-- language):
--   - puts off the lanes at once (ready_xid 0, where they are claimed as
--     rows when due) the rows it inserted that a lane cannot hand out: not
--     'available', due later, or with an ordering or unique key. A row
--     inserted due with none of these (what nearly every insert writes)
--     stays on its lane and costs nothing here;
--   - wakes each queue's workers once with NOTIFY actor_worker_jobs,
--     '<queue>' (transactional: a rolled-back insert wakes nobody), however
--     many rows it inserted.
CREATE OR REPLACE FUNCTION actor_worker_jobs_inserted()
RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_off bigint[];  -- the inserted rows that go off the lanes
BEGIN
  -- Collect them first and update only if there are any: starting an
  -- UPDATE of jobs opens every partition (about 1 ms), which a COPY of
  -- 1,000 plain jobs paid for nothing; with the look first, COPY in
  -- transactions of 1,000 went from about 75k to 100k jobs/s (three
  -- alternating pairs).
  SELECT array_agg(i.id) INTO v_off FROM inserted_jobs AS i
   WHERE i.ready_xid <> '0'
     AND (i.state <> 'available' OR i.run_at > now()
          OR i.ordering_key IS NOT NULL OR i.unique_key IS NOT NULL);
  IF v_off IS NOT NULL THEN
    UPDATE jobs_in AS j SET ready_xid = '0'
     WHERE j.id = ANY (v_off) AND j.ready_xid <> '0';
  END IF;
  PERFORM pg_notify('actor_worker_jobs', q.queue)
     FROM (SELECT DISTINCT i.queue FROM inserted_jobs AS i
            WHERE i.state IN ('available', 'scheduled')
              AND i.run_at <= now()) AS q;
  RETURN NULL;
END
$$;
