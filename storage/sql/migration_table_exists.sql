-- Whether any migration ran here (the version table exists).
SELECT to_regclass('actor_worker_migrations') IS NOT NULL AS present
