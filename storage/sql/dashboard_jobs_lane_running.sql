-- Dashboard job list, running jobs on the lanes: the rows of the open
-- claim batches that no batch_completions row lists yet (as the `jobs`
-- view derives it), below id $1, of queue $2 and kind $3 ('' = any), the
-- newest $4 (ids, newest first). Bounded by what the workers hold.
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT r.id
          FROM claim_batches AS b,
               LATERAL actor_worker_batch_rows(b) AS r
         WHERE b.closed_at IS NULL AND ($2 = '' OR b.queue = $2)
           AND r.state = 'available' AND r.id < $1
           AND ($3 = '' OR r.kind = $3)
           AND NOT EXISTS (SELECT 1 FROM batch_completions AS bc
                            WHERE bc.batch_id = b.id AND r.id = ANY (bc.ids))
         ORDER BY r.id DESC LIMIT $4) AS h
