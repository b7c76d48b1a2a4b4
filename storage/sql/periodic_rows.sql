-- Every schedule's row: what a scheduler needs at start (the latest tick
-- and the spec it was computed from), and what `actor-worker periodic`
-- lists. Ticks as seconds since the epoch; enqueued_at as text.
SELECT name, spec, extract(epoch FROM last_tick)::bigint AS last_tick,
       last_job_id, enqueued_at::text AS enqueued_at
  FROM periodic_schedules
 ORDER BY name
