-- The queue tables' dead tuples (statistics, updated within a second or so).
SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables
 WHERE schemaname = current_schema()
   AND relname IN ('claim_batches', 'batch_completions', 'claim_cursors')
