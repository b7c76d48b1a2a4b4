-- A worker's configured limits of queue $1 at start (0 = no limit):
-- global_concurrency $2, rate_limit $3 per $4 ms. The last node started
-- wins; the pause is left as it is. Returns the values it replaced
-- (existed = false for a new row), so the worker can log a change.
WITH old AS (
  SELECT c.global_concurrency, c.rate_limit, c.rate_period
    FROM queue_controls AS c WHERE c.queue = $1
)
INSERT INTO queue_controls AS q (queue, global_concurrency, rate_limit,
                                 rate_period)
VALUES ($1, nullif($2::integer, 0), nullif($3::integer, 0),
        nullif($4::bigint, 0) * interval '1 millisecond')
ON CONFLICT (queue) DO UPDATE
   SET global_concurrency = EXCLUDED.global_concurrency,
       rate_limit = EXCLUDED.rate_limit,
       rate_period = EXCLUDED.rate_period,
       updated_at = CASE WHEN (q.global_concurrency, q.rate_limit, q.rate_period)
                              IS DISTINCT FROM (EXCLUDED.global_concurrency,
                                                EXCLUDED.rate_limit,
                                                EXCLUDED.rate_period)
                         THEN now() ELSE q.updated_at END
RETURNING (SELECT count(*) > 0 FROM old) AS existed,
          (SELECT coalesce(o.global_concurrency, 0) FROM old AS o) AS old_global_concurrency,
          (SELECT coalesce(o.rate_limit, 0) FROM old AS o) AS old_rate_limit,
          (SELECT coalesce(extract(epoch FROM o.rate_period) * 1000, 0)::bigint
             FROM old AS o) AS old_rate_period_ms
