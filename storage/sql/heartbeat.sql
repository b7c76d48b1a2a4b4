-- One statement for every running row-per-state job of this worker, one
-- for every open batch.
UPDATE job_rows SET locked_at = now()
 WHERE id = ANY($1::bigint[]) AND state = 'running' AND locked_by = $2
RETURNING id
