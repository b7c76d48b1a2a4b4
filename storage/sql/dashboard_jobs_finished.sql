-- Dashboard job list, finished jobs off the lanes: state $2 ('completed'
-- or 'cancelled') below id $1, of queue $3 and kind $4 ('' = any), at most
-- $5, looking at no more than $6 of them (jobs_finished_idx, in id
-- order). Returns as dashboard_jobs_newest.sql does.
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT r.id FROM jobs AS r
           WHERE r.state = $2 AND r.state IN ('completed', 'cancelled')
             AND r.ready_xid = '0' AND r.id < $1
           ORDER BY r.id DESC LIMIT $6) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT r.id FROM jobs AS r
                 WHERE r.state = $2 AND r.state IN ('completed', 'cancelled')
                   AND r.ready_xid = '0'
                   AND r.id < $1 AND r.id >= w.low
                   AND ($3 = '' OR r.queue = $3)
                   AND ($4 = '' OR r.kind = $4)
                 ORDER BY r.id DESC LIMIT $5) AS h) AS ids
  FROM scan AS w
