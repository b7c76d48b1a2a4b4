DELETE FROM job_rows WHERE id IN (
  SELECT id FROM job_rows
   WHERE state IN ('completed', 'cancelled')
     AND finalized_at < now() - make_interval(secs => $1::double precision)
   ORDER BY finalized_at
   LIMIT $2)
