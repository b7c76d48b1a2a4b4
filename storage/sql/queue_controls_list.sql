-- Every queue_controls row (`actor-worker queues`, the dashboard).
SELECT queue, paused, paused_at::text AS paused_at,
       coalesce(global_concurrency, 0) AS global_concurrency,
       coalesce(rate_limit, 0) AS rate_limit,
       coalesce(extract(epoch FROM rate_period) * 1000, 0)::bigint
         AS rate_period_ms
  FROM queue_controls ORDER BY queue
