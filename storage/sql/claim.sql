-- One statement: row-per-state jobs and lane batches, lowest priority first,
-- of the kinds in $8 ('' = every kind).
-- A claim alone commits asynchronously (no WAL flush wait: 2-3 ms of the
-- pickup latency on these disks). Losing it in a server crash only makes
-- its jobs claimable again, at-least-once as after any crash, and every
-- outcome the worker later records commits synchronously, flushing the
-- claim's WAL with it. The setting is referenced so the planner keeps it.
SELECT batch_id, id, kind, args, priority, attempt, error_count,
       max_attempts, metadata, deadline_ms, event_row
  FROM (SELECT set_config('synchronous_commit', 'off', true) AS mode) AS claim_commit,
       actor_worker_claim($1, $2, $3, $4, $5, $6::text[], $7,
                          nullif($8, '')::text[])
 WHERE claim_commit.mode = 'off'
