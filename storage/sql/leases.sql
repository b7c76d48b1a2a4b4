-- What a worker does with the jobs it holds (docs/storage.md, concept 4):
-- heartbeats, the claims it never heard of taken back, handler starts
-- recorded, operators' cancel requests read, and its jobs released at shutdown.

-- name: heartbeat
-- Which of the leases $1 worker $2 holds are still its own: a rescue took
-- the others back. Each lease is looked up by its id on its own (see
-- functions/actor_worker_live_batches.sql: `id = ANY ($1)` beside the
-- worker read all of the worker's batches in a generic plan).
SELECT l.id
  FROM (SELECT DISTINCT x.id FROM unnest($1::bigint[]) AS x(id)) AS u,
       LATERAL (SELECT b.id FROM job_batches AS b
                 WHERE b.id = u.id AND b.worker = $2 AND b.rescued_at IS NULL
                 LIMIT 1) AS l

-- name: take_back_orphans
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
           AND actor_worker_try_batch(x.id)
         ORDER BY x.id
           FOR UPDATE SKIP LOCKED) AS b

-- name: record_starts
-- Jobs whose handlers started ($2 ids; $1 their leases, the ids of the
-- claims in job_batches), so that the rescue of a worker that dies
-- charges them and gives the jobs it only buffered back uncharged
-- (migrations/002_job_starts.sql): one row per claim.
INSERT INTO job_starts (batch_id, ids)
SELECT u.batch, array_agg(u.id)
  FROM unnest($1::bigint[], $2::bigint[]) AS u(batch, id)
 GROUP BY u.batch

-- name: cancel_requests
-- Which of the jobs $1 (held by this worker) an operator asked to cancel
-- (`jobs cancel`); the heartbeat round asks, in case the NOTIFY was missed.
SELECT job_id FROM job_cancel_requests WHERE job_id = ANY ($1::bigint[])

-- name: release
-- Jobs ($3 ids, $2 their leases) that worker $1 gives back unfinished, due
-- at once; $4: their handlers started (the attempt stays counted).
-- storage/sql/functions/actor_worker_release.sql.
SELECT actor_worker_release($1, $2::bigint[], $3::bigint[], $4) AS released
