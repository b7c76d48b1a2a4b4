-- Which of the leases $1 worker $2 holds are still its own: a rescue took
-- the others back. Each lease is looked up by its id on its own (see
-- functions/actor_worker_live_batches.sql: `id = ANY ($1)` beside the
-- worker read all of the worker's batches in a generic plan).
SELECT l.id
  FROM (SELECT DISTINCT x.id FROM unnest($1::bigint[]) AS x(id)) AS u,
       LATERAL (SELECT b.id FROM job_batches AS b
                 WHERE b.id = u.id AND b.worker = $2 AND b.rescued_at IS NULL
                 LIMIT 1) AS l
