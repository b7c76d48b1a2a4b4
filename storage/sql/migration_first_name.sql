-- The name of the first migration recorded: 001_baseline since 0.1, and
-- 001_initial for the schema before it (which migrate refuses).
SELECT name FROM actor_worker_migrations ORDER BY version LIMIT 1
