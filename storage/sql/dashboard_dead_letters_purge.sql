-- The dashboard's purge: deletes dead letter $1 (0 = any) of queue $2,
-- kind $3 and fingerprint $4 ('' = any). Returns how many, and the first
-- 1,000 of their original jobs' ids (for the audit log).
WITH gone AS (
  DELETE FROM dead_letter_jobs AS d
   WHERE ($1::bigint = 0 OR d.id = $1::bigint)
     AND ($2 = '' OR d.queue = $2)
     AND ($3 = '' OR d.kind = $3)
     AND ($4 = '' OR d.fingerprint = $4)
  RETURNING d.id, d.original_job_id
)
SELECT count(*) AS n,
       coalesce((array_agg(g.original_job_id ORDER BY g.id))[1:1000], '{}')
         AS job_ids
  FROM gone AS g
