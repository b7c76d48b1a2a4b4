-- The committed rows of observed lane completions, for their events.
SELECT id, to_jsonb(j)::text AS row_json FROM jobs AS j WHERE id = ANY($1::bigint[])
