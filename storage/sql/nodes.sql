-- The cluster's worker nodes and its leader (docs/operations.md).

-- name: node_refresh
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

-- name: node_leave
-- A graceful stop of worker $1. Its row goes at once when its batches hold
-- nothing any more (what a stop that released everything leaves); else it
-- is marked left, and the leader's rescue takes back what they still hold
-- at its next round, without waiting for the reclaim window.
WITH idle AS (
  SELECT NOT EXISTS (
           SELECT FROM job_batches AS b
            WHERE b.worker = $1 AND b.on_lane AND b.finished_at IS NULL
              AND b.rescued_at IS NULL
              AND b.size > actor_worker_batch_done(b.id))
         AND NOT EXISTS (
           SELECT FROM jobs_in AS j JOIN job_batches AS b ON b.id = j.batch_id
            WHERE j.state = 'running' AND b.worker = $1) AS yes
), gone AS (
  DELETE FROM worker_nodes AS n
   WHERE n.worker_id = $1 AND (SELECT yes FROM idle)
  RETURNING n.worker_id
)
UPDATE worker_nodes AS n SET left_at = now()
 WHERE n.worker_id = $1 AND NOT (SELECT yes FROM idle)

-- name: leader_resign
-- A graceful stop of the leader: the lease goes at once, and the NOTIFY on
-- channel $2 tells the other candidates to take it now rather than at
-- their next round. Nothing happens when the lease is not this process's.
WITH resigned AS (
  DELETE FROM cluster_leader WHERE worker_id = $1 RETURNING worker_id
), node AS (
  UPDATE worker_nodes SET leader = false
   WHERE worker_id IN (SELECT worker_id FROM resigned)
)
SELECT pg_notify($2, worker_id) FROM resigned

-- name: nodes_list
-- `actor-worker nodes`: every process of worker_nodes as a JSON array (keys
-- = column names, plus `alive`: seen within the reclaim window, $1 s), by
-- node and start time. `leader` is read from the lease itself: the process
-- holding an unexpired cluster_leader row (a killed leader's own row still
-- says true until its lease runs out and another takes it).
SELECT coalesce(json_agg(n ORDER BY n.node, n.started_at, n.worker_id),
                '[]')::text AS nodes
  FROM (SELECT w.worker_id, w.node, w.host, w.pid, w.version, w.started_at,
               w.last_seen_at, w.queues, w.running,
               EXISTS (SELECT FROM cluster_leader AS l
                        WHERE l.worker_id = w.worker_id
                          AND l.expires_at >= now()) AS leader,
               w.last_seen_at >= now() - make_interval(secs => $1::double precision)
                 AS alive
          FROM worker_nodes AS w
         WHERE w.left_at IS NULL) AS n

-- name: kind_unserved
-- Whether no live worker process runs jobs of kind $1 in queue $2, for
-- `enqueue`'s warning: live is not gone (left_at) and seen within the
-- reclaim window ($3 s); `kinds` NULL runs every kind (a process that
-- registers no kind list).
SELECT NOT EXISTS (
         SELECT FROM worker_nodes AS w
          WHERE w.left_at IS NULL
            AND w.last_seen_at >= now() - make_interval(secs => $3::double precision)
            AND $2 = ANY (w.queues)
            AND (w.kinds IS NULL OR $1 = ANY (w.kinds))) AS unserved
