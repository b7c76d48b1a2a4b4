-- `jobs retry` of a finished job (completed or cancelled): it runs again as
-- a new attempt, due now, off the lanes (a completed lane job's batch
-- would still show it completed). The attempt jobs counted is
-- written down, so the next run counts on from it. $2: the notify channel.
UPDATE jobs_in AS r
   SET state = 'available', ready_xid = '0', run_at = now(),
       attempt = v.attempt, finalized_at = NULL, batch_id = NULL,
       callback_timeout_at = NULL
  FROM jobs AS v
 WHERE r.id = $1 AND v.id = r.id AND v.state IN ('completed', 'cancelled')
RETURNING r.queue, pg_notify($2, r.queue) AS woken
