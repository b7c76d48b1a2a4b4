-- The wait before the next attempt after a failure, when the job had
-- `p_error_count` failures before it: 2^(p_error_count + 1) seconds (2 s,
-- 4 s, 8 s ...), capped at 2^40 s.
CREATE OR REPLACE FUNCTION actor_worker_retry_backoff(p_error_count integer)
RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT make_interval(secs => power(2, least(p_error_count + 1, 40))) $$;
