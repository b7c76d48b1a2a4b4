-- A new job_batches id: a sequence number times 2^20, 19 random bits, and
-- the lowest bit set for a lane batch. A claim lost in a server crash (they
-- commit asynchronously) may hand its sequence number out again, but
-- almost never its id, so a worker still running the lost claim's jobs
-- finds its outcomes stale instead of counted against the new claim. The
-- lowest bit tells storage which kind of batch a lease token names.
CREATE OR REPLACE FUNCTION actor_worker_batch_id(p_on_lane boolean)
RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
  SELECT nextval('job_batch_numbers') * 1048576
         + floor(random() * 524288)::bigint * 2
         + CASE WHEN p_on_lane THEN 1 ELSE 0 END
$$;
