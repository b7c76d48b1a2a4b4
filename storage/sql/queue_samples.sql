-- One sample of every queue's live jobs by state, for the queue-depth
-- gauges: (queue, state, jobs, oldest due run_at and its age in seconds).
-- Every part reads an index bounded by the live work, never the finished
-- jobs: a million completed jobs cost nothing here (run it after
-- queue_samples_settings(), storage/queue_samples.hpp).
--   lanes: the jobs not handed out yet (actor_worker_lane_waiting);
--   rows:  jobs off the lanes, by their partial indexes;
--   running: the unfinished jobs of the open lane batches, and the
--           running rows.
-- State 'unserved' counts the due available jobs whose kind no live
-- process runs in their queue (they would wait forever): live is not gone
-- (left_at) and seen within the reclaim window ($1 s); `kinds` NULL runs
-- every kind (as storage/sql/kind_unserved.sql decides for one job).
-- `ready` is read twice and MATERIALIZED: the lanes are scanned once.
WITH lanes AS (
  SELECT k.queue, k.priority, p.*
    FROM actor_worker_lanes() AS k
    LEFT JOIN LATERAL actor_worker_lane_head(k.queue, k.priority) AS p ON true
), lane_ready AS (
  SELECT l.queue, j.kind, count(*) AS jobs, min(j.run_at) AS oldest
    FROM lanes AS l
    CROSS JOIN LATERAL actor_worker_lane_waiting(
      l.queue, l.priority, l.tick_lo, l.tick_hi, l.to_xid, l.to_id,
      (-32768)::smallint, 32767::smallint) AS j
   GROUP BY l.queue, j.kind
), ready (queue, kind, jobs, oldest) AS MATERIALIZED (
  SELECT queue, kind, jobs, oldest FROM lane_ready
  UNION ALL
  SELECT queue, kind, count(*), min(run_at) FROM jobs_in
   WHERE ready_xid = '0' AND state IN ('available', 'scheduled') AND run_at <= now()
   GROUP BY queue, kind
), live_nodes AS (
  SELECT w.queues, w.kinds FROM worker_nodes AS w
   WHERE w.left_at IS NULL
     AND w.last_seen_at >= now() - make_interval(secs => $1::double precision)
), samples (queue, state, jobs, oldest) AS (
  SELECT queue, 'available', sum(jobs)::bigint, min(oldest) FROM ready
   GROUP BY queue
  UNION ALL
  SELECT r.queue, 'unserved', sum(r.jobs)::bigint, NULL FROM ready AS r
   WHERE NOT EXISTS (SELECT FROM live_nodes AS w
                      WHERE r.queue = ANY (w.queues)
                        AND (w.kinds IS NULL OR r.kind = ANY (w.kinds)))
   GROUP BY r.queue
  UNION ALL
  SELECT queue, 'scheduled', count(*), NULL FROM jobs_in
   WHERE ready_xid = '0' AND state IN ('available', 'scheduled') AND run_at > now()
   GROUP BY queue
  UNION ALL
  SELECT b.queue, 'running', sum(b.size - actor_worker_batch_done(b.id))::bigint, NULL
    FROM job_batches AS b
   WHERE b.on_lane AND b.finished_at IS NULL AND b.rescued_at IS NULL
   GROUP BY b.queue
  UNION ALL
  SELECT queue, 'running', count(*), NULL FROM jobs_in
   WHERE state = 'running' GROUP BY queue
  UNION ALL
  SELECT queue, 'waiting_external', count(*), NULL FROM jobs_in
   WHERE state = 'waiting_external' GROUP BY queue
  UNION ALL
  SELECT queue, 'dead_lettered', count(*), NULL FROM dead_letter_jobs
   GROUP BY queue
)
SELECT queue, state, jobs, oldest,
       extract(epoch FROM now() - oldest)::float8 AS oldest_age
  FROM samples
