-- Dead letter retention ([worker] dead_letter_retention): deletes up to $2
-- dead letters that failed more than $1 seconds ago, oldest first.
DELETE FROM dead_letter_jobs WHERE id IN (
  SELECT id FROM dead_letter_jobs
   WHERE failed_at < now() - make_interval(secs => $1::double precision)
   ORDER BY failed_at
   LIMIT $2)
