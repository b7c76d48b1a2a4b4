-- Dashboard job list, jobs on the lanes in state $6 ('available', 'running'
-- or 'completed', as jobs_live derives it: actor_worker_lane_state) below
-- id $1, of queue $2 and kind $3 ('' = any), at most $4, looking at no
-- more than the $5 rows below $1. Returns as dashboard_jobs_newest.sql
-- does. The state is derived per row, so the scan goes down the ids and
-- stops at the limit: the newest jobs are the ones a dashboard shows.
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT r.id FROM jobs AS r
           WHERE r.id < $1 ORDER BY r.id DESC LIMIT $5) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT r.id FROM jobs AS r
                  LEFT JOIN LATERAL actor_worker_lane_state(r.queue, r.priority,
                                r.ready_xid, r.id, r.state) AS l ON true
                 WHERE r.ready_xid <> '0' AND r.state = 'available'
                   AND coalesce(l.state, 'available') = $6
                   AND r.id < $1 AND r.id >= w.low
                   AND ($2 = '' OR r.queue = $2)
                   AND ($3 = '' OR r.kind = $3)
                 ORDER BY r.id DESC LIMIT $4) AS h) AS ids
  FROM scan AS w
