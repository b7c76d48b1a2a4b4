-- The claim (docs/storage.md): a worker's claim, and the outcomes and next claim
-- of its hot loop in one round trip. The claim's work is in
-- functions/actor_worker_claim.sql.

-- name: claim
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

-- name: finish_and_claim
-- The hot loop in one round trip and one commit: receipts for the lane
-- jobs that completed ($2 leases, $3 ids; storage/sql/functions/
-- actor_worker_complete.sql; their rows deleted when $9), then the next
-- claim (its lane wait $10), as claim returns it, with one more note
-- row: {"done": [the ids recorded]}.
WITH done AS MATERIALIZED (
  SELECT coalesce(array_agg(d), '{}') AS ids
    FROM actor_worker_complete($1, $2::bigint[], $3::bigint[], $9) AS d
)
SELECT c.lease, c.id, c.kind, c.args, c.priority, c.attempt, c.error_count,
       c.max_attempts, c.metadata, c.deadline_ms, c.event_row, c.note::text AS note
  FROM done, LATERAL actor_worker_claim($4, $1, $5, $6, nullif($7, '')::text[],
                                        $8::text[], $10) AS c
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       jsonb_build_object('done', done.ids)::text
  FROM done
