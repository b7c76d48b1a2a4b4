-- Sets the ring's period to $1 s when it differs (the leader, from its
-- completed_retention: docs/storage.md); the old period, or no row when
-- it was already so.
WITH old AS (SELECT period FROM job_ring FOR UPDATE),
changed AS (
  UPDATE job_ring SET period = make_interval(secs => $1::double precision)
   WHERE period <> make_interval(secs => $1::double precision)
  RETURNING period
)
SELECT extract(epoch FROM old.period)::bigint AS old_seconds,
       actor_worker_ring_rebuild($1::bigint) AS rebuilt
  FROM old, changed
