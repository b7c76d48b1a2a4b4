-- Claims of worker $1, a live one, that it does not hold ($2: the leases
-- it holds), still open and made more than $3 s ago: claims whose commit
-- it never heard of (the connection broke as they committed). Nothing
-- would take them back while the worker lives, so its own heartbeat does,
-- as the rescue does a gone worker's (actor_worker_take_back); the
-- leader's next rescue gives their jobs back (uncharged: none started).
-- Returns how many it took.
SELECT count(*) FILTER (WHERE actor_worker_take_back(b.id)) AS taken
  FROM (SELECT x.id FROM job_batches AS x
         WHERE x.worker = $1 AND x.rescued_at IS NULL AND x.finished_at IS NULL
           AND NOT (x.id = ANY ($2::bigint[]))
           AND x.claimed_at < now() - make_interval(secs => $3::double precision)
         ORDER BY x.id
           FOR UPDATE SKIP LOCKED) AS b
