-- `jobs cancel` of a job that has not started: it becomes cancelled at
-- once (through the `jobs` view, whose rules take a lane job off its lane).
-- A job of an ordering key wakes its queue: the next job of the key may
-- run now. $2: the notify channel.
UPDATE jobs AS j
   SET state = 'cancelled', finalized_at = now(), deadline_at = NULL,
       callback_timeout_at = NULL,
       last_error_message = 'cancelled by an operator (actor-worker jobs cancel)'
 WHERE j.id = $1 AND j.state IN ('scheduled', 'available', 'waiting_external')
RETURNING j.queue,
          CASE WHEN j.ordering_key IS NOT NULL
               THEN pg_notify($2, j.queue) END AS woken
