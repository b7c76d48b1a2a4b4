-- The handler of job $1 (lease $2) cancelled it, reason $3. A job of an
-- ordering key wakes its queue (channel $4): the next of its key may run.
UPDATE jobs_in AS j
   SET state = 'cancelled', finalized_at = now(), last_error_message = $3
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'cancelled', 'finalized_at', j.finalized_at,
            'last_error_message', $3::text)) AS row_json,
          CASE WHEN j.ordering_key IS NOT NULL
               THEN pg_notify($4, j.queue) END AS woken
