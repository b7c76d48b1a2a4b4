-- Dashboard job list, running jobs on the lanes: the rows of the open
-- claim batches that no batch_completions row lists yet (as the `jobs`
-- view derives it), below id $1, of queue $2 and kind $3 ('' = any), the
-- newest $4 (ids, newest first). Bounded by what the workers hold.
--
-- A batch's rows are read in the ranges actor_worker_batch_rows() reads,
-- written so the planner cannot take the primary key instead of the lane
-- index (a transaction that enqueued many rows gives them one ready_xid,
-- which then looks unselective, and a scan from lo_id up the primary key
-- would read the whole table): the first and last transactions of the
-- range are walked from the range's ends by row comparisons, which only
-- the lane index serves. The completed ids of the open batches are
-- unnested once and anti-joined.
WITH open AS MATERIALIZED (
  SELECT * FROM claim_batches
   WHERE closed_at IS NULL AND ($2 = '' OR queue = $2)
), candidates AS (
  SELECT b.id AS batch_id, r.id
    FROM open AS b
    CROSS JOIN LATERAL (
      -- (lo, hi] within one transaction.
      (SELECT x.id, x.kind, x.state FROM job_rows AS x
        WHERE b.lo_xid = b.hi_xid
          AND x.queue = b.queue AND x.priority = b.priority
          AND x.ready_xid IS NOT NULL AND x.ready_xid = b.lo_xid
          AND x.id > b.lo_id AND x.id <= b.hi_id)
      UNION ALL
      -- The rest of lo's transaction, from lo on.
      (SELECT x.id, x.kind, x.state FROM job_rows AS x
        WHERE b.lo_xid <> b.hi_xid
          AND x.queue = b.queue AND x.priority = b.priority
          AND x.ready_xid IS NOT NULL
          AND (x.ready_xid, x.id) > (b.lo_xid, b.lo_id)
          AND x.ready_xid <= b.lo_xid
        ORDER BY x.ready_xid, x.id LIMIT b.size)
      UNION ALL
      -- The transactions in between.
      (SELECT x.id, x.kind, x.state FROM job_rows AS x
        WHERE x.queue = b.queue AND x.priority = b.priority
          AND x.ready_xid IS NOT NULL
          AND x.ready_xid > b.lo_xid AND x.ready_xid < b.hi_xid
        ORDER BY x.ready_xid, x.id LIMIT b.size)
      UNION ALL
      -- hi's transaction up to hi, walked down from hi.
      (SELECT x.id, x.kind, x.state FROM job_rows AS x
        WHERE b.lo_xid <> b.hi_xid
          AND x.queue = b.queue AND x.priority = b.priority
          AND x.ready_xid IS NOT NULL
          AND (x.ready_xid, x.id) <= (b.hi_xid, b.hi_id)
          AND x.ready_xid >= b.hi_xid
        ORDER BY x.ready_xid DESC, x.id DESC LIMIT b.size)
    ) AS r
   WHERE r.state = 'available' AND r.id < $1 AND ($3 = '' OR r.kind = $3)
), done AS (
  SELECT bc.batch_id, unnest(bc.ids) AS id
    FROM batch_completions AS bc
   WHERE bc.batch_id IN (SELECT o.id FROM open AS o)
)
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT c.id FROM candidates AS c
         WHERE NOT EXISTS (SELECT 1 FROM done AS d
                            WHERE d.batch_id = c.batch_id AND d.id = c.id)
         ORDER BY c.id DESC LIMIT $4) AS h
