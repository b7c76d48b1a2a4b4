-- Trigger of queue_controls: announces a committed change of a queue's
-- pause to every worker (NOTIFY actor_worker_queue_controls with
-- 'pause:Q' or 'resume:Q'), whoever made it (the CLI, the dashboard, SQL).
CREATE OR REPLACE FUNCTION actor_worker_queue_controls_notify()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  -- The old row stops being paused: deleted, resumed, or renamed away.
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.paused THEN
    IF TG_OP = 'DELETE' OR NOT NEW.paused OR NEW.queue <> OLD.queue THEN
      PERFORM pg_notify('actor_worker_queue_controls', 'resume:' || OLD.queue);
    END IF;
  END IF;
  -- The new row starts being paused: inserted paused, paused, renamed to.
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.paused THEN
    IF TG_OP = 'INSERT' OR NOT OLD.paused OR NEW.queue <> OLD.queue THEN
      PERFORM pg_notify('actor_worker_queue_controls', 'pause:' || NEW.queue);
    END IF;
  END IF;
  RETURN NULL;
END
$$;
