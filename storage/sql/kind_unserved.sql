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
