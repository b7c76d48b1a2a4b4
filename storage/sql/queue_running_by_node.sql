-- The jobs each worker holds (claimed, buffered or running) per queue: the
-- open lane batches' remaining jobs and the running row-per-state jobs, by
-- the node of the worker (its worker_nodes row; the worker id when it has
-- none).
WITH held (queue, worker, jobs) AS (
  SELECT queue, worker, sum(remaining)::bigint FROM claim_batches
   WHERE closed_at IS NULL GROUP BY queue, worker
  UNION ALL
  SELECT queue, locked_by, count(*) FROM job_rows
   WHERE state = 'running' GROUP BY queue, locked_by
)
SELECT h.queue, coalesce(n.node, h.worker) AS node,
       sum(h.jobs)::bigint AS running
  FROM held AS h LEFT JOIN worker_nodes AS n ON n.worker_id = h.worker
 GROUP BY h.queue, coalesce(n.node, h.worker)
HAVING sum(h.jobs) > 0
 ORDER BY 1, 2
