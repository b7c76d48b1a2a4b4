-- Completions of lane jobs ($2 leases, $3 ids) of worker $1: one receipt
-- per batch (storage/sql/functions/actor_worker_complete.sql), the rows
-- deleted when $4 (completed_retention 0); the ids recorded.
SELECT actor_worker_complete($1, $2::bigint[], $3::bigint[], $4) AS id
