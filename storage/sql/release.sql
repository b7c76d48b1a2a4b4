-- Jobs ($3 ids, $2 their leases) that worker $1 gives back unfinished, due
-- at once; $4: their handlers started (the attempt stays counted).
-- storage/sql/functions/actor_worker_release.sql.
SELECT actor_worker_release($1, $2::bigint[], $3::bigint[], $4) AS released
