-- The priorities queue p_queue has jobs of, lowest first, on its lanes or
-- waiting off them (available or scheduled): what a claim goes through. Two
-- skip scans, one probe per priority each (jobs_lane_idx, jobs_due_idx).
CREATE OR REPLACE FUNCTION actor_worker_priorities(p_queue text)
RETURNS SETOF integer
LANGUAGE sql STABLE
AS $$
  WITH RECURSIVE lane(p) AS (
    (SELECT j.priority FROM jobs AS j
      WHERE j.queue = p_queue AND j.ready_xid <> '0'
      ORDER BY j.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs AS j
             WHERE j.queue = p_queue AND j.ready_xid <> '0' AND j.priority > lane.p
             ORDER BY j.priority LIMIT 1)
      FROM lane WHERE lane.p IS NOT NULL
  ), off(p) AS (
    (SELECT j.priority FROM jobs AS j
      WHERE j.queue = p_queue AND j.ready_xid = '0'
        AND j.state IN ('available', 'scheduled')
      ORDER BY j.priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM jobs AS j
             WHERE j.queue = p_queue AND j.ready_xid = '0'
               AND j.state IN ('available', 'scheduled') AND j.priority > off.p
             ORDER BY j.priority LIMIT 1)
      FROM off WHERE off.p IS NOT NULL
  )
  SELECT DISTINCT x.p FROM (SELECT p FROM lane UNION ALL SELECT p FROM off) AS x
   WHERE x.p IS NOT NULL
   ORDER BY x.p
$$;
