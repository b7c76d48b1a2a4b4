-- The hot loop in one round trip and one commit: the previous batch's
-- completions (lane jobs nobody observes) and the next claim.
SELECT batch_id, id, kind, args, priority, attempt, error_count,
       max_attempts, metadata, deadline_ms, event_row
  FROM actor_worker_finish_and_claim($1, $2::bigint[], $3::bigint[], $4, $5,
                                     $6, $7, $8, $9::text[], $10, $11,
                                     nullif($12, '')::text[])
