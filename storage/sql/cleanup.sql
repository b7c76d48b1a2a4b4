-- Finished row-per-state jobs past the retention. They live in
-- job_rows_main: a lane row's own state is always 'available', and lane
-- rows go a partition at a time (migrations/019_lane_partitions.sql).
DELETE FROM job_rows_main WHERE id IN (
  SELECT id FROM job_rows_main
   WHERE state IN ('completed', 'cancelled')
     AND finalized_at < now() - make_interval(secs => $1::double precision)
   ORDER BY finalized_at
   LIMIT $2)
