-- `jobs retry` of a job that waits for its run_at (scheduled, or available
-- after a failed attempt): due now. $2: the notify channel.
UPDATE jobs_in AS j SET run_at = least(j.run_at, now())
  FROM jobs AS v
 WHERE j.id = $1 AND v.id = j.id AND v.state IN ('scheduled', 'available')
RETURNING j.queue, pg_notify($2, j.queue) AS woken
