-- Dashboard job list, available jobs on the lanes: the rows after each
-- lane's claim cursor (no claim batch holds them), below id $1, of queue
-- $2 and kind $3 ('' = any), the newest $4 (ids, newest first). Reads the
-- lane index past the cursors only, as queue_samples.sql does: the cost is
-- the backlog's, not the table's.
WITH RECURSIVE lanes AS (
  (SELECT queue, priority FROM job_rows
    WHERE ready_xid IS NOT NULL AND ($2 = '' OR queue = $2)
    ORDER BY queue, priority LIMIT 1)
  UNION ALL
  SELECT n.queue, n.priority
    FROM lanes AS l,
         LATERAL (SELECT r.queue, r.priority FROM job_rows AS r
                   WHERE r.ready_xid IS NOT NULL
                     AND (r.queue, r.priority) > (l.queue, l.priority)
                     AND ($2 = '' OR r.queue = $2)
                   ORDER BY r.queue, r.priority LIMIT 1) AS n
)
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT x.id
          FROM lanes AS l
          LEFT JOIN claim_cursors AS c
                 ON c.queue = l.queue AND c.priority = l.priority
          JOIN LATERAL (
            SELECT r.id, r.kind FROM job_rows AS r
             WHERE r.queue = l.queue AND r.priority = l.priority
               AND r.ready_xid IS NOT NULL AND r.state = 'available'
               AND (r.ready_xid, r.id)
                   > (coalesce(c.last_xid, '0'::xid8), coalesce(c.last_id, 0))) AS x
            ON true
         WHERE x.id < $1 AND ($3 = '' OR x.kind = $3)
         ORDER BY x.id DESC LIMIT $4) AS h
