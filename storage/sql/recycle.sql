-- The ring's retention (storage/sql/functions/actor_worker_recycle.sql):
-- empties the slot that came due, for completed_retention $1 s, carrying
-- at most $2 jobs it still needs into the current slot this round; what it
-- did, or NULL.
SELECT actor_worker_recycle(make_interval(secs => $1::double precision),
                            $2::integer) AS done
