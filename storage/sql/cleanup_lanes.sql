-- Lane batches carry about a claim's worth of jobs each.
SELECT actor_worker_cleanup_lanes($1, $2) AS deleted
