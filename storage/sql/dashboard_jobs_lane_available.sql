-- Dashboard job list, available jobs on the lanes: lane rows past their
-- lane's claim cursor (no claim batch holds them), below id $1, of queue
-- $2 and kind $3 ('' = any), at most $4, looking at no more than the $5
-- rows below $1. Returns as dashboard_jobs_newest.sql does. A backlog is
-- usually the newest rows: the scan down the primary key meets it first,
-- whatever its size (reading the lanes past their cursors whole would cost
-- what the backlog holds).
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT r.id FROM job_rows AS r
           WHERE r.id < $1 ORDER BY r.id DESC LIMIT $5) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT r.id FROM job_rows AS r
                 WHERE r.ready_xid IS NOT NULL AND r.state = 'available'
                   AND r.id < $1 AND r.id >= w.low
                   AND ($2 = '' OR r.queue = $2)
                   AND ($3 = '' OR r.kind = $3)
                   AND NOT EXISTS (
                     SELECT 1 FROM claim_cursors AS c
                      WHERE c.queue = r.queue AND c.priority = r.priority
                        AND (r.ready_xid, r.id) <= (c.last_xid, c.last_id))
                 ORDER BY r.id DESC LIMIT $4) AS h) AS ids
  FROM scan AS w
