-- Retention of the unique jobs (the ring empties its slots whole:
-- recycle.sql): up to $2 finished jobs of jobs_unique whose retention
-- ($1 s) passed, oldest first. They are off the lanes (a unique job never
-- goes on one), so their own row says when they finished.
DELETE FROM jobs_in AS j
 WHERE j.id IN (
   SELECT g.id FROM jobs_in AS g
    WHERE g.unique_key IS NOT NULL
      AND g.ready_xid = '0' AND g.state IN ('completed', 'cancelled')
      AND g.finalized_at < now() - make_interval(secs => $1::double precision)
    ORDER BY g.finalized_at
    LIMIT $2)
