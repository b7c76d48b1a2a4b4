-- Dashboard job list of state $2 below id $1, of queue $3 and kind $4 (''
-- = any): the newest $5 ids, newest first, as `jobs` shows them. The state
-- leaves only the view's branches that can hold it (sent with its
-- parameters, so planned for them), each read by an index in id order.
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT j.id FROM jobs AS j
         WHERE j.state = $2 AND j.id < $1
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
         ORDER BY j.id DESC
         LIMIT $5) AS h
