-- Where job $1 is: its state and holder (as jobs shows them), its
-- lane (queue, priority), and whether its row is on that lane.
SELECT v.state, v.locked_by, v.queue, v.priority,
       (SELECT r.ready_xid <> '0' FROM jobs_in AS r WHERE r.id = v.id LIMIT 1)
         AS on_lane
  FROM jobs AS v WHERE v.id = $1
