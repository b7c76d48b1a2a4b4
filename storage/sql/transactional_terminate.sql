-- The server process $1 (started at $2) that sent a transactional
-- handler's COMMIT whose reply never came (job_store::transact): ended if
-- it is still there, so that its commit has happened or never will before
-- anyone reads what became of the job. The start time tells it from a
-- later process that got the same pid. A row while it is still there.
SELECT pg_terminate_backend(a.pid)
  FROM pg_stat_activity AS a
 WHERE a.pid = $1 AND a.backend_start = $2::timestamptz
