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
