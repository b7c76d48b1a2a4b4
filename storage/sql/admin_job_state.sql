-- Where job $1 is: its state and holder (as jobs_live shows them), its
-- lane (queue, priority), and whether its row is on that lane.
SELECT v.state, v.locked_by, v.queue, v.priority,
       (SELECT r.ready_xid <> '0' FROM jobs AS r WHERE r.id = v.id LIMIT 1)
         AS on_lane
  FROM jobs_live AS v WHERE v.id = $1
