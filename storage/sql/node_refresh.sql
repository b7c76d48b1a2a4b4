-- This process's row in worker_nodes: inserted on its first round (or again
-- after maintenance pruned it during a long outage), refreshed after (a HOT
-- update: nothing it sets is indexed). In the same statement a candidate
-- ($9) takes the leader lease when it is free or expired, or renews its
-- own for $8 s; it is the leader when the row is its own afterwards.
-- Concurrent candidates serialize on the lease row's key: one wins.
-- $10: the kinds it runs as a text array literal, '' for every kind (NULL:
-- what enqueue's warning and the queue samples' `unserved` read).
WITH lease AS (
  INSERT INTO cluster_leader AS l (worker_id, node, expires_at)
  SELECT $1, $2, now() + make_interval(secs => $8::double precision)
   WHERE $9::boolean
  ON CONFLICT (singleton) DO UPDATE
     SET worker_id = excluded.worker_id,
         node = excluded.node,
         elected_at = CASE WHEN l.worker_id = excluded.worker_id
                           THEN l.elected_at ELSE now() END,
         renewed_at = now(),
         expires_at = excluded.expires_at
   WHERE l.worker_id = excluded.worker_id OR l.expires_at < now()
  RETURNING worker_id
)
INSERT INTO worker_nodes AS n
       (worker_id, node, host, pid, version, queues, kinds, running, leader)
VALUES ($1, $2, $3, $4, $5, $6::text[], nullif($10, '')::text[], $7,
        EXISTS (SELECT FROM lease))
ON CONFLICT (worker_id) DO UPDATE
   SET last_seen_at = now(), running = excluded.running,
       leader = excluded.leader, kinds = excluded.kinds,
       -- Back after the rescue took its batches: rescued again if it goes
       -- silent again.
       rescued_at = NULL
RETURNING leader
