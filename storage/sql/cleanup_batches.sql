-- Batches kept past their ring slot (job_batches_kept) whose jobs no one
-- needs any more, at most $2, with their receipts and the lane jobs of
-- theirs that jobs_kept holds: lane batches finished (or rescued: their
-- other jobs are rows now) more than the retention ($1 s) ago and row
-- batches without a running job, but never a lane's position (its newest
-- batch).
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
     AND (NOT b.on_lane
          OR coalesce(b.finished_at, b.rescued_at)
             < now() - make_interval(secs => $1::double precision))
   LIMIT $2
), lane_jobs AS (
  -- One range scan of jobs_kept's lane index per batch.
  DELETE FROM jobs_kept AS j WHERE j.id IN (
    SELECT x.id FROM job_batches AS b CROSS JOIN LATERAL (
      SELECT r.id FROM jobs_kept AS r
       WHERE r.queue = b.queue AND r.priority = b.priority
         AND r.ready_xid <> '0'
         AND (r.ready_xid, r.id) >= (b.first_xid, b.first_id)
         AND r.ready_xid <= b.to_xid
         AND (r.ready_xid, r.id) <= (b.to_xid, b.to_id)
         AND pg_visible_in_snapshot(r.ready_xid, b.tick_hi)
         AND NOT pg_visible_in_snapshot(r.ready_xid, b.tick_lo)) AS x
     WHERE b.id IN (SELECT id FROM gone) AND b.on_lane)
), receipts AS (
  DELETE FROM batch_receipts AS r WHERE r.batch_id IN (SELECT id FROM gone)
)
DELETE FROM job_batches AS b WHERE b.slot = -1 AND b.id IN (SELECT id FROM gone)
