-- Rows of processes the rescue took back more than ten reclaim windows
-- ($1 s) ago, and that no batch names any more.
DELETE FROM worker_nodes AS n
 WHERE n.rescued_at < now() - make_interval(secs => $1::double precision)
   AND NOT EXISTS (SELECT 1 FROM job_batches AS b
                    WHERE b.worker = n.worker_id AND b.rescued_at IS NULL)
