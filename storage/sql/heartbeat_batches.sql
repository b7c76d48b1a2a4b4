UPDATE claim_batches SET heartbeat_at = now()
 WHERE id = ANY($1::bigint[]) AND worker = $2 AND closed_at IS NULL
RETURNING id
