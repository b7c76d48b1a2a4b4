-- The hot loop in one round trip and one commit: receipts for the lane
-- jobs that completed ($2 leases, $3 ids; storage/sql/functions/
-- actor_worker_complete.sql; their rows deleted when $9), then the next
-- claim (its lane wait $10), as claim.sql returns it, with one more note
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
