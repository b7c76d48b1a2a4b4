-- The priorities queue p_queue has jobs of, lowest first, on its lanes or
-- waiting off them (available or scheduled): what a claim goes through.
-- `off_lanes`: jobs of that priority wait off the lanes, so the claim
-- looks for due ones there (actor_worker_claim_rows); without any it skips
-- that statement, which opens every partition of jobs. Two skip scans, one
-- probe per priority each (jobs_lane_idx, jobs_due_idx); lane jobs never
-- have a unique key (actor_worker_jobs_inserted moves them off), so the
-- lane probes leave jobs_unique out at plan time.
CREATE OR REPLACE FUNCTION actor_worker_claim_order(p_queue text)
RETURNS TABLE (priority integer, off_lanes boolean)
LANGUAGE sql STABLE
AS $$
  WITH RECURSIVE lane(p) AS (
    (SELECT j.priority FROM jobs_in AS j
      WHERE j.queue = p_queue AND j.ready_xid <> '0' AND j.unique_key IS NULL
      ORDER BY j.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs_in AS j
             WHERE j.queue = p_queue AND j.ready_xid <> '0' AND j.unique_key IS NULL
               AND j.priority > lane.p
             ORDER BY j.priority LIMIT 1)
      FROM lane WHERE lane.p IS NOT NULL
  ), off(p) AS (
    (SELECT j.priority FROM jobs_in AS j
      WHERE j.queue = p_queue AND j.ready_xid = '0'
        AND j.state IN ('available', 'scheduled')
      ORDER BY j.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs_in AS j
             WHERE j.queue = p_queue AND j.ready_xid = '0'
               AND j.state IN ('available', 'scheduled') AND j.priority > off.p
             ORDER BY j.priority LIMIT 1)
      FROM off WHERE off.p IS NOT NULL
  )
  SELECT x.p, bool_or(x.off)
    FROM (SELECT p, false AS off FROM lane UNION ALL SELECT p, true FROM off) AS x
   WHERE x.p IS NOT NULL
   GROUP BY x.p
   ORDER BY x.p
$$;
