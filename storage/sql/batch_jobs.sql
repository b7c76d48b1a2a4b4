-- The jobs of a lane batch claimed above, read after its claim committed.
SELECT batch_id, id, kind, args, priority, attempt, error_count,
       max_attempts, metadata, deadline_ms, event_row
  FROM actor_worker_batch_jobs($1, $2, $3::text[])
