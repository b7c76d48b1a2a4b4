CREATE TABLE IF NOT EXISTS actor_worker_migrations (
  version    integer PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)
