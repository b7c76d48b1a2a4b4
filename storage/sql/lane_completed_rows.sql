-- The rows of lane jobs $1 just completed, as jobs shows them now
-- (read in the transaction that wrote their receipts), for the events of
-- kinds that hooks or follow-ups observe.
SELECT v.id, to_jsonb(v)::text AS row_json FROM jobs AS v
 WHERE v.id = ANY ($1::bigint[])
