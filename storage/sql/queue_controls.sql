-- Queue controls: pause, resume, and the cluster-wide limits (docs/operations.md).

-- name: queue_controls_apply
-- A worker's configured limits of queue $1 at start (0 = no limit):
-- global_concurrency $2, rate_limit $3 per $4 ms. The last node started
-- wins; the pause is left as it is. Returns the values it replaced
-- (existed = false for a new row), so the worker can log a change.
WITH old AS (
  SELECT c.global_concurrency, c.rate_limit, c.rate_period
    FROM queue_controls AS c WHERE c.queue = $1
)
INSERT INTO queue_controls AS q (queue, global_concurrency, rate_limit,
                                 rate_period)
VALUES ($1, nullif($2::integer, 0), nullif($3::integer, 0),
        nullif($4::bigint, 0) * interval '1 millisecond')
ON CONFLICT (queue) DO UPDATE
   SET global_concurrency = EXCLUDED.global_concurrency,
       rate_limit = EXCLUDED.rate_limit,
       rate_period = EXCLUDED.rate_period,
       updated_at = CASE WHEN (q.global_concurrency, q.rate_limit, q.rate_period)
                              IS DISTINCT FROM (EXCLUDED.global_concurrency,
                                                EXCLUDED.rate_limit,
                                                EXCLUDED.rate_period)
                         THEN now() ELSE q.updated_at END
RETURNING (SELECT count(*) > 0 FROM old) AS existed,
          (SELECT coalesce(o.global_concurrency, 0) FROM old AS o) AS old_global_concurrency,
          (SELECT coalesce(o.rate_limit, 0) FROM old AS o) AS old_rate_limit,
          (SELECT coalesce(extract(epoch FROM o.rate_period) * 1000, 0)::bigint
             FROM old AS o) AS old_rate_period_ms

-- name: queue_controls_list
-- Every queue_controls row (`actor-worker queues`, the dashboard).
SELECT queue, paused, paused_at::text AS paused_at,
       coalesce(global_concurrency, 0) AS global_concurrency,
       coalesce(rate_limit, 0) AS rate_limit,
       coalesce(extract(epoch FROM rate_period) * 1000, 0)::bigint
         AS rate_period_ms
  FROM queue_controls ORDER BY queue

-- name: queue_known
-- Whether queue $1 is known to the database: it has a queue_controls row
-- (every worker writes one for each queue it serves), a job, or a dead
-- letter.
SELECT EXISTS (SELECT 1 FROM queue_controls WHERE queue = $1)
       OR EXISTS (SELECT 1 FROM jobs_in WHERE queue = $1 LIMIT 1)
       OR EXISTS (SELECT 1 FROM dead_letter_jobs WHERE queue = $1) AS known

-- name: queue_pause
-- `queues pause $1`: marks the queue paused (kept paused_at when it already
-- was). The table's trigger (migrations/016) NOTIFYs every worker
-- ("pause:QUEUE") when this commits, if the queue was not paused before; a
-- worker that misses the NOTIFY finds the pause on its next claim. Returns
-- when the pause began.
INSERT INTO queue_controls AS q (queue, paused, paused_at)
VALUES ($1, true, now())
ON CONFLICT (queue) DO UPDATE
   SET paused = true, paused_at = coalesce(q.paused_at, now()),
       updated_at = now()
RETURNING q.paused_at::text AS paused_at

-- name: queue_resume
-- `queues resume $1`: clears the pause; the table's trigger (migrations/016)
-- wakes every worker ("resume:QUEUE") when this commits, if the queue was
-- paused. Returns whether it had been paused.
-- (`before` reads the statement's snapshot: the row as it was. A FOR
-- UPDATE there would skip the row this statement updates.)
WITH before AS (
  SELECT c.paused FROM queue_controls AS c WHERE c.queue = $1
)
INSERT INTO queue_controls AS q (queue, paused, paused_at)
VALUES ($1, false, NULL)
ON CONFLICT (queue) DO UPDATE
   SET paused = false, paused_at = NULL, updated_at = now()
RETURNING coalesce((SELECT b.paused FROM before AS b), false) AS was_paused

-- name: queue_running_by_node
-- The jobs each worker holds (claimed, buffered or running) per queue:
-- the unfinished jobs of its open lane batches (their size less their
-- receipts) and its running rows, by the node of the worker (its
-- worker_nodes row; the worker id when it has none).
WITH held (queue, worker, jobs) AS (
  SELECT b.queue, b.worker, sum(b.size - actor_worker_batch_done(b.id))::bigint
    FROM job_batches AS b
   WHERE b.on_lane AND b.finished_at IS NULL AND b.rescued_at IS NULL
   GROUP BY b.queue, b.worker
  UNION ALL
  SELECT j.queue, b.worker, count(*) FROM jobs_in AS j
    JOIN job_batches AS b ON b.id = j.batch_id
   WHERE j.state = 'running' GROUP BY j.queue, b.worker
)
SELECT h.queue, coalesce(n.node, h.worker) AS node,
       sum(h.jobs)::bigint AS running
  FROM held AS h LEFT JOIN worker_nodes AS n ON n.worker_id = h.worker
 GROUP BY h.queue, coalesce(n.node, h.worker)
HAVING sum(h.jobs) > 0
 ORDER BY 1, 2
