-- The ids a receipt row holds: bucket p_bucket (ids p_bucket * 64 to
-- p_bucket * 64 + 63), one bit each in p_mask.
CREATE OR REPLACE FUNCTION actor_worker_bit_ids(p_bucket bigint, p_mask bigint)
RETURNS SETOF bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT (p_bucket << 6) + b FROM generate_series(0, 63) AS b
   WHERE (p_mask >> b) & 1 = 1
$$;
