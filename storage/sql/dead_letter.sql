-- The run of job $1 (lease $2) failed for good, or on its last allowed
-- attempt: the job moves to the dead letter queue with $3 as its last
-- error (actor_worker_dead_letter). A job of an ordering key wakes its
-- queue (channel $4): the next of its key may run.
SELECT actor_worker_dead_letter(j.id, $3) AS row_json,
       CASE WHEN j.ordering_key IS NOT NULL THEN pg_notify($4, j.queue) END AS woken
  FROM (SELECT r.id, r.ordering_key, r.queue FROM jobs_in AS r
         WHERE r.id = $1 AND r.batch_id = $2 AND r.state = 'running'
           FOR UPDATE) AS j
