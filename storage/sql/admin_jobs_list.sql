-- One page of `jobs list`: at most $5 jobs of jobs_live with id > $1, in
-- id order (keyset pagination: the next page starts after the last id),
-- optionally of state $2, queue $3 and kind $4 ('' = any), as one JSON
-- array. No count: the page stops at the limit.
--
-- jobs_live derives `state` for lane jobs, so a filter on it cannot use an
-- index by itself; the IN list narrows the rows to those whose row can
-- have that state: a row's own state, or a lane row's 'available', which
-- may show as running or completed.
SELECT coalesce(json_agg(p.j ORDER BY p.id), '[]')::text AS jobs
  FROM (SELECT j.id, row_to_json(j) AS j
          FROM jobs_live AS j
         WHERE j.id > $1
           AND ($2 = '' OR j.state = $2)
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
           AND ($2 = '' OR j.id IN (
                 SELECT r.id FROM jobs AS r
                  WHERE r.id > $1
                    AND (r.state = $2
                         OR (r.ready_xid <> '0' AND r.state = 'available'
                             AND $2 IN ('running', 'completed')))))
         ORDER BY j.id
         LIMIT $5) AS p
