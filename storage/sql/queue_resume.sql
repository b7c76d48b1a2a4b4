-- `queues resume $1`: clears the pause; the table's trigger (migrations/016)
-- wakes every worker ("resume:QUEUE") when this commits, if the queue was
-- paused. Returns whether it had been paused.
-- (`before` reads the statement's snapshot: the row as it was. A FOR
-- UPDATE there would skip the row this statement updates.)
WITH before AS (
  SELECT c.paused FROM queue_controls AS c WHERE c.queue = $1
)
INSERT INTO queue_controls AS q (queue, paused, paused_at)
VALUES ($1, false, NULL)
ON CONFLICT (queue) DO UPDATE
   SET paused = false, paused_at = NULL, updated_at = now()
RETURNING coalesce((SELECT b.paused FROM before AS b), false) AS was_paused
