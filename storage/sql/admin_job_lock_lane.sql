-- Takes lane ($1, $2) for the rest of the transaction: a claim of that
-- lane waits (and one in flight is waited for), so the next statement
-- sees whether the job was claimed and no claim takes it meanwhile. The
-- lane's claims take turns on this lock (actor_worker_claim).
SELECT pg_advisory_xact_lock(hashtext($1), $2::integer)
