-- Dashboard job list, any state: the newest jobs below id $1, of queue $2
-- and kind $3 ('' = any), at most $4, looking at no more than the $5 rows
-- below $1 (so a filter that matches little costs a bounded scan, not the
-- whole table). Returns the ids found (newest first), and the lowest id
-- looked at with how many were (fewer than $5: nothing below was left).
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT r.id FROM jobs_in AS r
           WHERE r.id < $1 ORDER BY r.id DESC LIMIT $5) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT r.id FROM jobs_in AS r
                 WHERE r.id < $1 AND r.id >= w.low
                   AND ($2 = '' OR r.queue = $2)
                   AND ($3 = '' OR r.kind = $3)
                 ORDER BY r.id DESC LIMIT $4) AS h) AS ids
  FROM scan AS w
