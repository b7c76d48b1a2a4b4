-- `jobs cancel` of a job that has not started: it becomes cancelled at
-- once, off its lane. A job of an ordering key wakes its queue: the next
-- job of the key may run now. $2: the notify channel.
UPDATE jobs_in AS j
   SET state = 'cancelled', finalized_at = now(), ready_xid = '0',
       batch_id = NULL, callback_timeout_at = NULL,
       last_error_message = 'cancelled by an operator (actor-worker jobs cancel)'
  FROM jobs AS v
 WHERE j.id = $1 AND v.id = j.id
   AND v.state IN ('scheduled', 'available', 'waiting_external')
RETURNING j.queue,
          CASE WHEN j.ordering_key IS NOT NULL
               THEN pg_notify($2, j.queue) END AS woken
