-- Retention outside the ring's slots (the ring empties its slots whole:
-- recycle.sql): up to $2 finished jobs off the lanes of jobs_unique and
-- jobs_kept whose retention ($1 s) passed. The lane jobs jobs_kept holds
-- go with the batch that handed them out (cleanup_batches.sql, and
-- actor_worker_recycle for a batch its slot drops): a lane job has no
-- finish time of its own, and judging one without its batch meant
-- searching every later batch for it (minutes per round under load).
DELETE FROM jobs AS j
 WHERE j.id IN (
   SELECT g.id FROM jobs AS g
    WHERE (g.unique_key IS NOT NULL OR g.slot = -1)
      AND g.ready_xid = '0' AND g.state IN ('completed', 'cancelled')
      AND g.finalized_at < now() - make_interval(secs => $1::double precision)
    ORDER BY g.finalized_at
    LIMIT $2)
