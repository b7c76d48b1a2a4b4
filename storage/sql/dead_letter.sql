-- The run's last allowed attempt failed, or it failed for good: the row
-- moves to the dead letter queue (actor_worker_dead_letter,
-- migrations/006_dead_letter.sql). A job with an ordering key unblocks
-- the next of its key: wake that queue's pollers.
WITH moved AS (
  DELETE FROM job_rows AS j
   WHERE id = $1 AND state = 'running' AND locked_by = $2 AND attempt = $5
  RETURNING j
)
SELECT to_jsonb(actor_worker_dead_letter(m.j, $3))::text AS row_json,
       CASE WHEN (m.j).ordering_key IS NOT NULL
            THEN pg_notify($4, (m.j).queue) END AS woken
  FROM moved AS m
