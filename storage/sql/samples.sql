-- Metrics' reads: the queues' depths and the jobs' pickup latency.

-- name: queue_samples
-- One sample of every queue's live jobs by state, for the queue-depth
-- gauges, `actor-worker queues` and the dashboard: (queue, state, jobs,
-- oldest due run_at and its age in seconds), read from `jobs`, the view
-- users read (docs/sql.md). The states named leave out the view's
-- finished branches at plan time, so a million completed jobs cost
-- nothing here; every branch left reads an index bounded by the live work
-- (run it after queue_samples_settings(), storage/queue_samples.hpp).
-- State 'unserved' counts the available jobs whose kind no live process
-- runs in their queue (they would wait forever): live is not gone
-- (left_at) and seen within the reclaim window ($1 s); `kinds` NULL runs
-- every kind (as storage/sql/kind_unserved.sql decides for one job).
WITH live (queue, state, kind, jobs, oldest) AS MATERIALIZED (
  SELECT j.queue, j.state, j.kind, count(*), min(j.run_at)
    FROM jobs AS j
   WHERE j.state IN ('available', 'scheduled', 'running', 'waiting_external')
   GROUP BY j.queue, j.state, j.kind
), live_nodes AS (
  SELECT w.queues, w.kinds FROM worker_nodes AS w
   WHERE w.left_at IS NULL
     AND w.last_seen_at >= now() - make_interval(secs => $1::double precision)
), samples (queue, state, jobs, oldest) AS (
  SELECT l.queue, l.state, sum(l.jobs)::bigint,
         CASE WHEN l.state = 'available' THEN min(l.oldest) END
    FROM live AS l
   GROUP BY l.queue, l.state
  UNION ALL
  SELECT l.queue, 'unserved', sum(l.jobs)::bigint, NULL FROM live AS l
   WHERE l.state = 'available'
     AND NOT EXISTS (SELECT FROM live_nodes AS w
                      WHERE l.queue = ANY (w.queues)
                        AND (w.kinds IS NULL OR l.kind = ANY (w.kinds)))
   GROUP BY l.queue
  UNION ALL
  SELECT queue, 'dead_lettered', count(*), NULL FROM dead_letter_jobs
   GROUP BY queue
)
SELECT queue, state, jobs, oldest,
       extract(epoch FROM now() - oldest)::float8 AS oldest_age
  FROM samples

-- name: wait_times
-- Seconds since each claimed job became due (its run_at), for the pickup
-- latency histogram. Read only when metrics are on: one index lookup per
-- claimed job.
SELECT id, extract(epoch FROM clock_timestamp() - run_at)::float8 AS waited
  FROM jobs_in WHERE id = ANY ($1::bigint[])
