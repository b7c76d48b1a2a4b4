-- Lane jobs ($2 leases, $3 ids) of worker $1 whose run ends other than by
-- completing become running rows of their batch, for the row statements
-- (storage/sql/functions/actor_worker_materialize.sql); the ids changed.
SELECT actor_worker_materialize($1, $2::bigint[], $3::bigint[]) AS id
