-- Callback $1 fails its waiting job: it moves to the dead letter queue
-- with $2 as its last error (actor_worker_dead_letter).
SELECT actor_worker_dead_letter(j.id, $2) AS row_json
  FROM (SELECT r.id FROM jobs_in AS r
         WHERE r.callback_id = $1::uuid AND r.state = 'waiting_external'
           FOR UPDATE) AS j
