-- Lane batches whose receipts hold all their jobs but that are not marked
-- finished (two outcome commits each saw only its own receipt): marked,
-- with their last receipt's time. At most $1.
UPDATE job_batches AS b
   SET finished_at = r.at
  FROM (SELECT x.id, max(c.at) AS at
          FROM job_batches AS x JOIN batch_receipts AS c ON c.batch_id = x.id
         WHERE x.on_lane AND x.finished_at IS NULL AND x.rescued_at IS NULL
         GROUP BY x.id, x.size
        HAVING actor_worker_batch_done(x.id) >= x.size
         LIMIT $1) AS r
 WHERE b.id = r.id
