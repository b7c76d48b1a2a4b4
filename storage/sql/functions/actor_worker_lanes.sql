-- Every lane (queue, priority) that has jobs on it, in order: a skip scan
-- of the lane index (one probe per lane), so lanes need no table that
-- every insert would have to write. A lane whose jobs all went with their
-- ring slot is no longer listed; its position (its newest batch) stays.
CREATE OR REPLACE FUNCTION actor_worker_lanes()
RETURNS TABLE (queue text, priority integer)
LANGUAGE sql STABLE
AS $$
  WITH RECURSIVE l(queue, priority) AS (
    (SELECT j.queue, j.priority FROM jobs_in AS j WHERE j.ready_xid <> '0'
      ORDER BY j.queue, j.priority LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority
      FROM l, LATERAL (SELECT j.queue, j.priority FROM jobs_in AS j
                        WHERE j.ready_xid <> '0'
                          AND (j.queue, j.priority) > (l.queue, l.priority)
                        ORDER BY j.queue, j.priority LIMIT 1) AS n
  )
  SELECT l.queue, l.priority FROM l
$$;
