-- Where job $1 is: its state (as the `jobs` view shows it, or `packed_jobs`
-- for a job still in its pack), who holds it, its lane (queue, priority)
-- and whether its row is on that lane (a packed job always is).
SELECT j.state, j.locked_by, j.queue, j.priority,
       (SELECT r.ready_xid IS NOT NULL FROM job_rows AS r WHERE r.id = j.id)
         AS on_lane
  FROM jobs AS j WHERE j.id = $1
UNION ALL
SELECT j.state, j.locked_by, j.queue, j.priority, true
  FROM actor_worker_packed_jobs(ARRAY[$1::bigint]) AS j
