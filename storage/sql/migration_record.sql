-- Records migration $1 ($2) as applied.
INSERT INTO actor_worker_migrations (version, name) VALUES ($1, $2)
