-- Dashboard job list, packed jobs (migrations/020_job_packs.sql): jobs of
-- the packs below id $1, of state $2, queue $3 and kind $4 ('' = any), at
-- most $5, looking at no more than the packs that hold $6 jobs below $1.
-- Returns as dashboard_jobs_newest.sql does (low: the lowest pack read,
-- scanned: the jobs its packs hold). A packed job's state is derived from
-- its batch, as a lane job's.
WITH scan AS MATERIALIZED (
  SELECT k.* FROM job_packs AS k
   WHERE k.first_id < $1
   ORDER BY k.first_id DESC
   LIMIT greatest(1, ($6 + 1023) / 1024)
), hits AS (
  SELECT j.id FROM scan AS k CROSS JOIN LATERAL actor_worker_pack_jobs(k) AS j
   WHERE j.id < $1
     AND ($2 = '' OR j.state = $2)
     AND ($3 = '' OR j.queue = $3)
     AND ($4 = '' OR j.kind = $4)
   ORDER BY j.id DESC
   LIMIT $5
)
SELECT (SELECT min(first_id) FROM scan) AS low,
       (SELECT coalesce(sum(n), 0) FROM scan) AS scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') FROM hits AS h)
         AS ids
