-- 006_dead_letter: the move to the dead letter queue in one place.
--
-- A job is dead-lettered by the worker (its last allowed attempt failed,
-- or it failed for good), by a rescue (an expired lease or callback on its
-- last attempt) and by a callback that fails it. Each caller deletes the
-- row under its own guard and hands it over whole; this inserts its dead
-- letter, charging the failure that buried it, and returns it.
--
-- A dead letter keeps the callback id its job waited on, so resolving a
-- callback that already failed its job says "already resolved" rather than
-- "no such callback".
ALTER TABLE dead_letter_jobs ADD COLUMN callback_id uuid;
CREATE INDEX dead_letter_jobs_callback_idx ON dead_letter_jobs (callback_id)
  WHERE callback_id IS NOT NULL;

CREATE FUNCTION actor_worker_dead_letter(p_job job_rows, p_message text)
RETURNS dead_letter_jobs
LANGUAGE sql VOLATILE AS $$
  INSERT INTO dead_letter_jobs
    (original_job_id, kind, queue, args, priority, attempt, max_attempts,
     error_count, last_error_message, created_at, failed_at, metadata, tags,
     callback_id)
  VALUES (p_job.id, p_job.kind, p_job.queue, p_job.args, p_job.priority,
          p_job.attempt, p_job.max_attempts, p_job.error_count + 1, p_message,
          p_job.created_at, now(), p_job.metadata, p_job.tags,
          p_job.callback_id)
  RETURNING *
$$;
