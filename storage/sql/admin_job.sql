-- One job as JSON, as the `jobs` view shows it, or `packed_jobs` for a job
-- still in its pack (`actor-worker job show`).
SELECT row_to_json(j)::text AS job FROM jobs AS j WHERE j.id = $1
UNION ALL
SELECT row_to_json(j)::text FROM actor_worker_packed_jobs(ARRAY[$1::bigint]) AS j
