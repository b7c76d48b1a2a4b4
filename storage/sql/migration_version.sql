-- The schema version applied so far (0 before the first migration).
SELECT coalesce(max(version), 0) AS version FROM actor_worker_migrations
