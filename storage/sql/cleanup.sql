-- Retention outside the ring's slots (the ring empties its slots whole:
-- recycle.sql): up to $2 finished jobs of jobs_unique and jobs_kept, and
-- jobs_kept's lane jobs, whose retention ($1 s) passed.
WITH gone AS (
  SELECT j.id FROM jobs AS j
   WHERE (j.unique_key IS NOT NULL OR j.slot = -1)
     AND j.ready_xid = '0' AND j.state IN ('completed', 'cancelled')
     AND j.finalized_at < now() - make_interval(secs => $1::double precision)
   ORDER BY j.finalized_at
   LIMIT $2
), lane_gone AS (
  SELECT j.id FROM jobs AS j,
       LATERAL actor_worker_lane_state(j.queue, j.priority, j.ready_xid, j.id,
                                       j.state) AS l
   WHERE j.slot = -1 AND j.unique_key IS NULL AND j.ready_xid <> '0'
     AND l.state = 'completed'
     AND coalesce(l.finalized_at, '-infinity')
         < now() - make_interval(secs => $1::double precision)
   LIMIT $2
)
DELETE FROM jobs AS j
 WHERE j.id IN (SELECT id FROM gone UNION ALL SELECT id FROM lane_gone)
