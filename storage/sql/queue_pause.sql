-- `queues pause $1`: marks the queue paused (kept paused_at when it already
-- was). The table's trigger (migrations/016) NOTIFYs every worker
-- ("pause:QUEUE") when this commits, if the queue was not paused before; a
-- worker that misses the NOTIFY finds the pause on its next claim. Returns
-- when the pause began.
INSERT INTO queue_controls AS q (queue, paused, paused_at)
VALUES ($1, true, now())
ON CONFLICT (queue) DO UPDATE
   SET paused = true, paused_at = coalesce(q.paused_at, now()),
       updated_at = now()
RETURNING q.paused_at::text AS paused_at
