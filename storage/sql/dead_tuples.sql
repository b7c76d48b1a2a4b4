-- The small queue tables' dead tuples (statistics, updated within a second
-- or so): the ring's tables are emptied whole and need no vacuum here.
SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables
 WHERE schemaname = current_schema()
   AND relname IN ('worker_nodes', 'queue_controls',
                   'queue_starts', 'jobs_unique', 'job_starts', 'job_ring')
