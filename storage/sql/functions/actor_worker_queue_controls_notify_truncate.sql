-- Trigger of queue_controls: a TRUNCATE resumes every paused queue.
CREATE OR REPLACE FUNCTION actor_worker_queue_controls_notify_truncate()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  PERFORM pg_notify('actor_worker_queue_controls', 'resume:' || c.queue)
     FROM queue_controls AS c WHERE c.paused;
  RETURN NULL;
END
$$;
