-- This session's server process and when it started, for
-- transactional_terminate.sql.
SELECT pg_backend_pid() AS pid, backend_start::text AS started
  FROM pg_stat_activity WHERE pid = pg_backend_pid()
