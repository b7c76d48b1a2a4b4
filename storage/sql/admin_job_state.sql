-- Where job $1 is: its state (as the `jobs` view shows it), who holds it,
-- its lane (queue, priority) and whether its row is on that lane.
SELECT j.state, j.locked_by, j.queue, j.priority,
       (SELECT r.ready_xid IS NOT NULL FROM job_rows AS r WHERE r.id = j.id)
         AS on_lane
  FROM jobs AS j WHERE j.id = $1
