-- Migrations and the schema check (storage/migrations.hpp, schema_check.hpp).

-- name: create_version_table
CREATE TABLE IF NOT EXISTS actor_worker_migrations (
  version    integer PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migration_table_exists
-- Whether any migration ran here (the version table exists).
SELECT to_regclass('actor_worker_migrations') IS NOT NULL AS present

-- name: migration_lock
-- Serializes concurrent `migrate` runs cluster-wide, until the commit.
SELECT pg_advisory_xact_lock($1)

-- name: migration_version
-- The schema version applied so far (0 before the first migration).
SELECT coalesce(max(version), 0) AS version FROM actor_worker_migrations

-- name: migration_first_name
-- The name of the first migration recorded: 001_baseline since 0.1, and
-- 001_initial for the schema before it (which migrate refuses).
SELECT name FROM actor_worker_migrations ORDER BY version LIMIT 1

-- name: migration_record
-- Records migration $1 ($2) as applied.
INSERT INTO actor_worker_migrations (version, name) VALUES ($1, $2)

-- name: schema_columns
-- The columns of the tables $1 in the current schema (the schema check).
SELECT table_name, column_name FROM information_schema.columns
 WHERE table_schema = current_schema() AND table_name = ANY ($1::text[])

-- name: schema_functions
-- The runtime's SQL functions present in the current schema.
SELECT proname, pronargs FROM pg_proc
 WHERE pronamespace = current_schema()::regnamespace
   AND proname LIKE 'actor\_worker\_%'
