-- 016_queue_controls_notify: a pause or resume reaches the workers at once
-- however it was written (README "Queue controls").
--
-- Until now only `actor-worker queues pause|resume` and the dashboard sent
-- the NOTIFY that tells the pollers; a plain `UPDATE queue_controls SET
-- paused = true` from psql or another language was noticed at each
-- poller's next claim. Now the table announces every change of a queue's
-- pause itself, on channel actor_worker_queue_controls (the listener's,
-- config/defaults.hpp queue_controls_channel) with the payload
-- 'pause:QUEUE' or 'resume:QUEUE', and the CLI's statements send none of
-- their own. NOTIFY is transactional: the workers hear the change when it
-- commits, a rolled-back change is never heard, and a transaction that
-- pauses a queue twice sends one notification.
--
-- Only a change is announced: a row inserted unpaused (every worker start
-- writes one per queue it serves) or an update that leaves `paused` as it
-- was (pausing a paused queue) tells nobody anything.

CREATE FUNCTION actor_worker_queue_controls_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
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

-- Updates that set neither column (the limits a worker writes at start)
-- do not call it.
CREATE TRIGGER queue_controls_notify
  AFTER INSERT OR DELETE OR UPDATE OF queue, paused ON queue_controls
  FOR EACH ROW EXECUTE FUNCTION actor_worker_queue_controls_notify();

-- TRUNCATE removes rows without row triggers: resume the paused queues it
-- is about to remove (read before they go).
CREATE FUNCTION actor_worker_queue_controls_notify_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('actor_worker_queue_controls', 'resume:' || c.queue)
     FROM queue_controls AS c WHERE c.paused;
  RETURN NULL;
END
$$;

CREATE TRIGGER queue_controls_notify_truncate
  BEFORE TRUNCATE ON queue_controls
  FOR EACH STATEMENT EXECUTE FUNCTION actor_worker_queue_controls_notify_truncate();
