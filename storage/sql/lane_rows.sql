-- The committed rows of observed lane completions, for their events (from
-- `jobs`, or from their packs for packed jobs).
SELECT id, to_jsonb(j)::text AS row_json FROM jobs AS j WHERE id = ANY($1::bigint[])
UNION ALL
SELECT id, to_jsonb(j)::text FROM actor_worker_packed_jobs($1::bigint[]) AS j
