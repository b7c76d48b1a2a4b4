-- Dashboard dead letter list: the newest dead letters below id $1, of
-- queue $2, kind $3 and fingerprint $4 ('' = any), at most $5, looking at
-- no more than the $6 dead letters below $1. Returns as
-- dashboard_jobs_newest.sql does.
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT d.id FROM dead_letter_jobs AS d
           WHERE d.id < $1 ORDER BY d.id DESC LIMIT $6) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT d.id FROM dead_letter_jobs AS d
                 WHERE d.id < $1 AND d.id >= w.low
                   AND ($2 = '' OR d.queue = $2)
                   AND ($3 = '' OR d.kind = $3)
                   AND ($4 = '' OR d.fingerprint = $4)
                 ORDER BY d.id DESC LIMIT $5) AS h) AS ids
  FROM scan AS w
