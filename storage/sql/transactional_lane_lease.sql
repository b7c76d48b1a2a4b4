-- A transactional group's transaction (job_store::transact) holds the
-- leases of its lane jobs ($3, leases $2, worker $1) without writing them
-- (storage/sql/functions/actor_worker_transactional_lease.sql); the ids
-- held.
SELECT actor_worker_transactional_lease($1, $2::bigint[], $3::bigint[]) AS id
