-- `actor-worker nodes`: every process of worker_nodes as a JSON array (keys
-- = column names, plus `alive`: seen within the reclaim window, $1 s), by
-- node and start time.
SELECT coalesce(json_agg(n ORDER BY n.node, n.started_at, n.worker_id),
                '[]')::text AS nodes
  FROM (SELECT worker_id, node, host, pid, version, started_at, last_seen_at,
               queues, running, leader,
               last_seen_at >= now() - make_interval(secs => $1::double precision)
                 AS alive
          FROM worker_nodes) AS n
