-- One sample of every queue's live jobs by state, for the queue-depth
-- gauges: (queue, state, jobs, oldest due run_at and its age in seconds). Every part reads an
-- index bounded by the live work, never the completed rows: a million
-- finished jobs cost nothing here.
--   lanes:  the rows after each lane's claim cursor (claimed rows stay on
--           the lane until retention, behind the cursor); lanes are found
--           by a loose scan of the lane index;
--   rows:   the row-per-state claim index (available and scheduled) and
--           the partial indexes of running and waiting rows;
--   lane jobs running: the open claim batches' remaining jobs;
--   packs:  the packed jobs after each lane's cursor (migrations/020), a
--           pack at a time from the lane's packs index.
WITH RECURSIVE lanes AS (
  (SELECT queue, priority FROM job_rows
    WHERE ready_xid IS NOT NULL ORDER BY queue, priority LIMIT 1)
  UNION ALL
  SELECT n.queue, n.priority
    FROM lanes AS l,
         LATERAL (SELECT r.queue, r.priority FROM job_rows AS r
                   WHERE r.ready_xid IS NOT NULL
                     AND (r.queue, r.priority) > (l.queue, l.priority)
                   ORDER BY r.queue, r.priority LIMIT 1) AS n
), lane_ready AS (
  SELECT l.queue, count(r.id) AS jobs,
         (SELECT min(f.run_at) FROM job_rows AS f
           WHERE f.id = min(r.id)) AS oldest
    FROM lanes AS l
    LEFT JOIN claim_cursors AS c ON c.queue = l.queue AND c.priority = l.priority
    JOIN LATERAL (SELECT x.id FROM job_rows AS x
                   WHERE x.queue = l.queue AND x.priority = l.priority
                     AND x.ready_xid IS NOT NULL
                     AND (x.ready_xid, x.id)
                         > (coalesce(c.last_xid, '0'::xid8), coalesce(c.last_id, 0))) AS r
      ON true
   GROUP BY l.queue, l.priority
), pack_lanes AS (
  (SELECT queue, priority FROM job_packs ORDER BY queue, priority LIMIT 1)
  UNION ALL
  SELECT n.queue, n.priority
    FROM pack_lanes AS l,
         LATERAL (SELECT x.queue, x.priority FROM job_packs AS x
                   WHERE (x.queue, x.priority) > (l.queue, l.priority)
                   ORDER BY x.queue, x.priority LIMIT 1) AS n
), pack_ready AS (
  -- A pack after the cursor counts its jobs still in it; the one the
  -- cursor is in, those after the cursor.
  SELECT l.queue,
         sum(CASE WHEN (x.ready_xid, x.first_id) > (k.xid, k.id)
                  THEN x.n - cardinality(x.unpacked)
                  ELSE x.first_id + x.n - 1 - k.id
                       - (SELECT count(*) FROM unnest(x.unpacked) AS u
                           WHERE u > k.id) END) AS jobs,
         min(x.created_at) AS oldest
    FROM pack_lanes AS l
    LEFT JOIN claim_cursors AS c ON c.queue = l.queue AND c.priority = l.priority
    CROSS JOIN LATERAL (SELECT coalesce(c.last_xid, '0'::xid8) AS xid,
                               coalesce(c.last_id, 0) AS id) AS k
    JOIN LATERAL (SELECT * FROM job_packs AS p
                   WHERE p.queue = l.queue AND p.priority = l.priority
                     AND (p.ready_xid, p.first_id) > (k.xid, k.id - 1024)) AS x
      ON (x.ready_xid, x.first_id + x.n - 1) > (k.xid, k.id)
   GROUP BY l.queue, l.priority
), samples (queue, state, jobs, oldest) AS (
SELECT queue, 'available', sum(jobs)::bigint, min(oldest)
  FROM (SELECT queue, jobs, oldest FROM lane_ready
        UNION ALL
        SELECT queue, jobs, oldest FROM pack_ready) AS ready
 GROUP BY queue
UNION ALL
SELECT queue,
       CASE WHEN run_at <= now() THEN 'available' ELSE 'scheduled' END,
       count(*), min(run_at) FILTER (WHERE run_at <= now())
  FROM job_rows
 WHERE state IN ('available', 'scheduled') AND ready_xid IS NULL
 GROUP BY 1, 2
UNION ALL
SELECT queue, 'running', count(*), NULL FROM job_rows
 WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, 'running', sum(remaining)::bigint, NULL FROM claim_batches
 WHERE closed_at IS NULL GROUP BY queue
UNION ALL
SELECT queue, 'waiting_external', count(*), NULL FROM job_rows
 WHERE state = 'waiting_external' GROUP BY queue
UNION ALL
SELECT queue, 'dead_lettered', count(*), NULL FROM dead_letter_jobs
 GROUP BY queue
)
SELECT queue, state, jobs, oldest,
       extract(epoch FROM now() - oldest)::float8 AS oldest_age
  FROM samples
