-- Job $1 as it was before this transaction: its state and holder, or no
-- row when this transaction inserted it (a unique enqueue that found a
-- duplicate returns the existing job's id).
SELECT j.state, j.locked_by
  FROM jobs AS j
 WHERE j.id = $1
   AND (SELECT r.xmin FROM job_rows AS r WHERE r.id = $1)
       <> pg_current_xact_id()::xid
