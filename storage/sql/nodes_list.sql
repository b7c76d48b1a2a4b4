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
