-- Job $1 of lease $2 runs again after $3 ms, not charged.
UPDATE jobs_in AS j
   SET state = 'scheduled', run_at = now() + $3::bigint * interval '1 millisecond',
       batch_id = NULL
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'scheduled', 'run_at', j.run_at)) AS row_json
