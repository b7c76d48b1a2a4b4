-- Rows of processes not seen for ten reclaim windows ($1 s): long dead.
DELETE FROM worker_nodes
 WHERE last_seen_at < now() - make_interval(secs => $1::double precision)
