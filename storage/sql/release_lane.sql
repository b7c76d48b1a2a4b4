SELECT actor_worker_release_lane($1, $2::bigint[], $3::bigint[], $4) AS released
