-- Serializes concurrent `migrate` runs cluster-wide, until the commit.
SELECT pg_advisory_xact_lock($1)
