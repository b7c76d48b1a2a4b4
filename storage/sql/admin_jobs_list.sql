-- One page of `jobs list`: at most $5 rows of the `jobs` view with id > $1,
-- in id order (keyset pagination: the next page starts after the last id),
-- optionally of state $2, queue $3 and kind $4 ('' = any), as one JSON
-- array. No count: the page stops at the limit.
--
-- The view derives `state` for lane jobs, so a filter on it cannot use an
-- index by itself; the IN list narrows the rows to those whose base row can
-- have that state, which the planner takes from job_rows' partial indexes:
-- a row off the lanes (ready_xid NULL) has its real state, and a lane row
-- is 'available' in job_rows and may show as available, running or
-- completed.
SELECT coalesce(json_agg(p.j ORDER BY p.id), '[]')::text AS jobs
  FROM (SELECT j.id, row_to_json(j) AS j
          FROM jobs AS j
         WHERE j.id > $1
           AND ($2 = '' OR j.state = $2)
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
           AND ($2 = '' OR j.id IN (
                 SELECT r.id FROM job_rows AS r
                  WHERE r.id > $1
                    AND ((r.state = $2 AND r.ready_xid IS NULL)
                         OR (r.ready_xid IS NOT NULL AND r.state = 'available'
                             AND $2 IN ('available', 'running',
                                        'completed')))))
         ORDER BY j.id
         LIMIT $5) AS p
