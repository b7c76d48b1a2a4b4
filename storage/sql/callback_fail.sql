-- A callback fails its waiting job: it moves to the dead letter queue
-- (actor_worker_dead_letter, migrations/006_dead_letter.sql).
WITH moved AS (
  DELETE FROM job_rows AS j
   WHERE callback_id = $1::uuid AND state = 'waiting_external'
  RETURNING j
)
SELECT to_jsonb(actor_worker_dead_letter(m.j, $2))::text AS row_json FROM moved AS m
