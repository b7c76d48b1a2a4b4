-- This process's row in worker_nodes: inserted on its first round (or again
-- after maintenance pruned it during a long outage), refreshed after. A
-- HOT update: nothing it sets is indexed.
INSERT INTO worker_nodes (worker_id, node, host, pid, version, queues, running)
VALUES ($1, $2, $3, $4, $5, $6::text[], $7)
ON CONFLICT (worker_id) DO UPDATE
   SET last_seen_at = now(), running = excluded.running
