-- Start records (job_starts) no rescue can need any more (at most $1,
-- oldest first): their claim is gone or was rescued, or holds no running
-- job (a lane batch finished, a row batch without a running row).
DELETE FROM job_starts WHERE ctid IN (
  SELECT s.ctid FROM job_starts AS s
   WHERE NOT EXISTS (
           SELECT 1 FROM job_batches AS b
            WHERE b.id = s.batch_id AND b.rescued_at IS NULL
              AND CASE WHEN b.on_lane THEN b.finished_at IS NULL
                       ELSE EXISTS (SELECT 1 FROM jobs_in AS j
                                     WHERE j.batch_id = b.id
                                       AND j.state = 'running') END)
   ORDER BY s.at
   LIMIT $1)
