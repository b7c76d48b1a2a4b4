-- Dashboard job list, completed jobs on the lanes: lane rows below id $1
-- whose claim batch lists them as completed (as the `jobs` view derives
-- it), of queue $2 and kind $3 ('' = any), at most $4, looking at no more
-- than the $5 rows below $1. Returns as dashboard_jobs_newest.sql does. The check is a LATERAL per row, so the scan goes down the primary
-- key and stops at the limit: a batch's completion rows hold arrays of
-- hundreds of ids, too dear to test for every row of the window.
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT r.id FROM job_rows AS r
           WHERE r.id < $1 ORDER BY r.id DESC LIMIT $5) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT r.id FROM job_rows AS r
                 CROSS JOIN LATERAL (
                   SELECT 1 FROM actor_worker_batch_of(r) AS b
                    WHERE EXISTS (SELECT 1 FROM batch_completions AS bc
                                   WHERE bc.batch_id = b.id
                                     AND r.id = ANY (bc.ids))
                    LIMIT 1) AS done
                 WHERE r.ready_xid IS NOT NULL AND r.state = 'available'
                   AND r.id < $1 AND r.id >= w.low
                   AND ($2 = '' OR r.queue = $2)
                   AND ($3 = '' OR r.kind = $3)
                 ORDER BY r.id DESC LIMIT $4) AS h) AS ids
  FROM scan AS w
