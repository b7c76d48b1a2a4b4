-- Moves job p_id to the dead letter queue with p_message as its last error
-- (its error_count counts this failure), in the caller's transaction;
-- returns the dead letter row as JSON, or nothing when no such job is
-- left. The caller has checked that the run may do this (the job is still
-- its own).
CREATE OR REPLACE FUNCTION actor_worker_dead_letter(p_id bigint, p_message text)
RETURNS text
LANGUAGE sql VOLATILE
AS $$
  WITH moved AS (
    DELETE FROM jobs_in AS j WHERE j.id = p_id RETURNING j.*
  ), letter AS (
    INSERT INTO dead_letter_jobs
      (original_job_id, kind, queue, args, priority, attempt, max_attempts,
       error_count, last_error_message, created_at, failed_at, metadata, tags,
       callback_id)
    SELECT m.id, m.kind, m.queue, m.args, m.priority, m.attempt,
           m.max_attempts, least(m.error_count + 1, 1000000), p_message,
           m.created_at, now(), m.metadata, m.tags, m.callback_id
      FROM moved AS m
    RETURNING *
  )
  SELECT to_jsonb(l)::text FROM letter AS l
$$;
