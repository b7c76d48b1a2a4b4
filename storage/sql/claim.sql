-- The claim (storage/sql/functions/actor_worker_claim.sql): claimed jobs
-- in claim order, then at most one note row (lease NULL).
-- A claim alone commits asynchronously (no WAL flush wait: 2-3 ms of the
-- pickup latency on these disks). Losing it in a server crash only makes
-- its jobs claimable again, at-least-once as after any crash, and every
-- outcome the worker later records commits synchronously, flushing the
-- claim's WAL with it. The setting is referenced so the planner keeps it.
SELECT lease, id, kind, args, priority, attempt, error_count, max_attempts,
       metadata, deadline_ms, event_row, note::text AS note
  FROM (SELECT set_config('synchronous_commit', 'off', true) AS mode) AS claim_commit,
       actor_worker_claim($1, $2, $3, $4, nullif($5, '')::text[], $6::text[], $7)
 WHERE claim_commit.mode = 'off'
