-- Periodic jobs (storage/periodic_schedules.hpp): a tick taken once per schedule.

-- name: periodic_rows
-- Every schedule's row: what a scheduler needs at start (the latest tick
-- and the spec it was computed from), and what `actor-worker periodic`
-- lists. Ticks as seconds since the epoch; enqueued_at as text.
SELECT name, spec, extract(epoch FROM last_tick)::bigint AS last_tick,
       last_job_id, enqueued_at::text AS enqueued_at
  FROM periodic_schedules
 ORDER BY name

-- name: periodic_claim_tick
-- Takes tick $3 (seconds since the epoch) of schedule $1 (spec $2): inserts
-- the schedule's row, or moves its last_tick forward to the tick, only
-- while last_tick is earlier. Returns a row when this transaction took the
-- tick (it then enqueues the job and sets last_job_id in the same
-- transaction), none when another scheduler took it or a later one. A
-- concurrent taker of the same row waits for this transaction (the
-- primary key) and then sees the new last_tick.
INSERT INTO periodic_schedules AS s (name, spec, last_tick, last_job_id)
VALUES ($1, $2, to_timestamp($3::bigint), 0)
ON CONFLICT (name) DO UPDATE
   SET spec = excluded.spec, last_tick = excluded.last_tick,
       last_job_id = 0, enqueued_at = now()
 WHERE s.last_tick < excluded.last_tick
RETURNING name

-- name: periodic_set_job
-- The job enqueued for schedule $1's tick, in the transaction that took it.
UPDATE periodic_schedules SET last_job_id = $2 WHERE name = $1
