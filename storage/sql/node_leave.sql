-- A graceful stop of worker $1. Its row goes at once when its batches hold
-- nothing any more (what a stop that released everything leaves); else it
-- is marked left, and the leader's rescue takes back what they still hold
-- at its next round, without waiting for the reclaim window.
WITH idle AS (
  SELECT NOT EXISTS (
           SELECT FROM job_batches AS b
            WHERE b.worker = $1 AND b.on_lane AND b.finished_at IS NULL
              AND b.rescued_at IS NULL
              AND b.size > actor_worker_batch_done(b.id))
         AND NOT EXISTS (
           SELECT FROM jobs_in AS j JOIN job_batches AS b ON b.id = j.batch_id
            WHERE j.state = 'running' AND b.worker = $1) AS yes
), gone AS (
  DELETE FROM worker_nodes AS n
   WHERE n.worker_id = $1 AND (SELECT yes FROM idle)
  RETURNING n.worker_id
)
UPDATE worker_nodes AS n SET left_at = now()
 WHERE n.worker_id = $1 AND NOT (SELECT yes FROM idle)
