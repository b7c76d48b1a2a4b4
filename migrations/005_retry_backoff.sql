-- 005_retry_backoff: the retry backoff in one place.
--
-- A failed attempt that may run again is rescheduled after
-- 2^(error_count + 1) seconds, error_count being the failures charged
-- before this one: 2 s, 4 s, 8 s ... The exponent is capped only to keep
-- the interval representable. Used by outcome recording and by rescues.
CREATE FUNCTION actor_worker_retry_backoff(p_error_count integer)
RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT make_interval(secs => power(2, least(p_error_count + 1, 40)))
$$;
