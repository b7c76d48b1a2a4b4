-- Trigger of jobs_in, once per inserting statement (INSERT or COPY, from
-- any language), after it:
--   - puts off the lanes at once (ready_xid 0, where they are claimed as
--     rows when due) this transaction's rows that a lane cannot hand out:
--     not 'available', due later, or with an ordering or unique key. A row
--     inserted due with none of these (what nearly every insert writes)
--     stays on its lane and costs nothing here;
--   - wakes each queue with a job due from this transaction once with
--     NOTIFY actor_worker_jobs, '<queue>' (transactional: a rolled-back
--     insert wakes nobody; NOTIFY drops repeats within a transaction).
-- It has no transition table: one makes PostgreSQL insert a COPY into a
-- partitioned table row by row (no multi-insert), which cost COPY a
-- quarter of its rate. It finds the rows instead: those a lane cannot hand
-- out by jobs_arrivals_idx (only they have an entry: a row that sets
-- neither state, run_at, created_at nor a key has none), the lanes this
-- transaction filled by one probe of the lane index per lane of the
-- current ring slot (where every row inserted now lands).
CREATE OR REPLACE FUNCTION actor_worker_jobs_inserted()
RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_xid  xid8 := pg_current_xact_id();
  v_slot smallint := actor_worker_slot();
  v_n    bigint;
BEGIN
  -- Look first, update only if there is something: starting an UPDATE of
  -- jobs_in opens every partition (about 1 ms), which a COPY of 1,000 plain
  -- jobs paid for nothing.
  IF EXISTS (SELECT 1 FROM jobs_in AS j
              WHERE j.ready_xid = v_xid AND j.ready_xid <> '0'
                AND (j.state <> 'available' OR j.run_at <> j.created_at
                     OR j.ordering_key IS NOT NULL OR j.unique_key IS NOT NULL)) THEN
    WITH moved AS (
      UPDATE jobs_in AS j SET ready_xid = '0'
       WHERE j.ready_xid = v_xid AND j.ready_xid <> '0'
         AND (j.state <> 'available' OR j.run_at <> j.created_at
              OR j.ordering_key IS NOT NULL OR j.unique_key IS NOT NULL)
         AND (j.state <> 'available' OR j.run_at > now()
              OR j.ordering_key IS NOT NULL OR j.unique_key IS NOT NULL)
      RETURNING j.queue, j.state, j.run_at
    )
    SELECT count(pg_notify('actor_worker_jobs', q.queue)) INTO v_n
      FROM (SELECT DISTINCT m.queue FROM moved AS m
             WHERE m.state IN ('available', 'scheduled') AND m.run_at <= now()) AS q;
  END IF;
  WITH RECURSIVE l(queue, priority) AS (
    (SELECT j.queue, j.priority FROM jobs_in AS j
      WHERE j.slot = v_slot AND j.ready_xid <> '0' AND j.unique_key IS NULL
      ORDER BY j.queue, j.priority LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority
      FROM l, LATERAL (SELECT j.queue, j.priority FROM jobs_in AS j
                        WHERE j.slot = v_slot AND j.ready_xid <> '0'
                          AND j.unique_key IS NULL
                          AND (j.queue, j.priority) > (l.queue, l.priority)
                        ORDER BY j.queue, j.priority LIMIT 1) AS n
  )
  SELECT count(pg_notify('actor_worker_jobs', l.queue)) INTO v_n
    FROM l, LATERAL (SELECT 1 FROM jobs_in AS j
                      WHERE j.slot = v_slot AND j.queue = l.queue
                        AND j.priority = l.priority AND j.ready_xid = v_xid
                        AND j.ready_xid <> '0'  -- the lane index's predicate
                        AND j.unique_key IS NULL
                      LIMIT 1) AS mine;  -- a probe per lane
  RETURN NULL;
END
$$;
