-- `jobs retry` of a finished job (completed or cancelled): it runs again as
-- a new attempt, due now. Written on job_rows, on the row-per-state path
-- (ready_xid NULL): a completed lane job keeps its place in its closed
-- batch's receipts otherwise, and would still show as completed. Lane
-- retention deletes only rows still on a lane, so the receipts left behind
-- never delete it; the attempt the view derived from the batch is written
-- down, so the next run counts on from it. $2: the notify channel.
UPDATE job_rows AS r
   SET state = 'available', ready_xid = NULL, run_at = now(),
       attempt = j.attempt,
       finalized_at = NULL, locked_by = NULL, locked_at = NULL,
       deadline_at = NULL, callback_timeout_at = NULL
  FROM jobs AS j
 WHERE r.id = $1 AND j.id = r.id AND j.state IN ('completed', 'cancelled')
RETURNING r.queue, pg_notify($2, r.queue) AS woken
