-- Batches kept past their ring slot (job_batches_kept) that are finished
-- for more than the retention ($1 s), or rescued (their jobs are rows
-- now), and not their lane's position (its newest batch); at most $2,
-- with their receipts.
WITH newest AS (
  SELECT p.id FROM (SELECT DISTINCT b.queue, b.priority FROM job_batches AS b
                     WHERE b.on_lane) AS k, LATERAL (
    SELECT b.id FROM job_batches AS b
     WHERE b.queue = k.queue AND b.priority = k.priority AND b.on_lane
     ORDER BY b.id DESC LIMIT 1) AS p
), gone AS (
  SELECT b.id FROM job_batches AS b
   WHERE b.slot = -1 AND b.id NOT IN (SELECT id FROM newest)
     AND NOT EXISTS (SELECT 1 FROM jobs AS j
                      WHERE j.batch_id = b.id AND j.state = 'running')
     AND (b.rescued_at IS NOT NULL OR NOT b.on_lane
          OR b.finished_at < now() - make_interval(secs => $1::double precision))
   LIMIT $2
), receipts AS (
  DELETE FROM batch_receipts AS r WHERE r.batch_id IN (SELECT id FROM gone)
)
DELETE FROM job_batches AS b WHERE b.slot = -1 AND b.id IN (SELECT id FROM gone)
