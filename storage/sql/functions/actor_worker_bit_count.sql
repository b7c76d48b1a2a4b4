-- How many jobs a receipt row holds: the bits set in its mask.
CREATE OR REPLACE FUNCTION actor_worker_bit_count(p_mask bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT bit_count(p_mask::bit(64)) $$;
