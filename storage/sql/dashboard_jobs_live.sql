-- Dashboard job list, live jobs off the lanes: state $2 ('scheduled',
-- 'available', 'running' or 'waiting_external') below id $1, of queue $3
-- and kind $4 ('' = any), the newest $5 (ids, newest first). These rows
-- are few (the work not done yet) and each state has a partial index
-- (jobs_due_idx, jobs_running_idx, jobs_waiting_idx): they are read whole
-- and sorted, never by a walk down the ids past the finished rows (`id + 0`
-- keeps the planner off that walk).
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT r.id FROM jobs AS r
         WHERE r.state = $2 AND r.ready_xid = '0' AND r.id < $1
           AND ($3 = '' OR r.queue = $3)
           AND ($4 = '' OR r.kind = $4)
         ORDER BY r.id + 0 DESC LIMIT $5) AS h
