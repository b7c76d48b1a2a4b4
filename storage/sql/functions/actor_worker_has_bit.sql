-- Whether receipt bits `p_mask` (of the 64 ids p_id >> 6 names, as
-- batch_receipts keeps them) hold job p_id. A plain expression: the
-- planner inlines it, so a scan tests a bit per row, no call.
CREATE OR REPLACE FUNCTION actor_worker_has_bit(p_mask bigint, p_id bigint)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (p_mask >> (p_id & 63)::integer) & 1 = 1 $$;
