-- An error message with what varies from one occurrence to the next taken
-- out, so failures of the same cause group together (the dashboard's
-- "Failures" page, by kind and fingerprint). Applied in this order, on the
-- first 1,000 characters:
--   1. quoted values ('...', "...", `...`; a quote inside a word, as in
--      "can't", does not start one)                        -> <str>
--   2. UUIDs                                               -> <uuid>
--   3. timestamps (2026-12-01T10:09:57.495Z, 2026-12-01 10:09:57+02)
--                                                          -> <time>
--   4. hex: 0x... and words of 8 or more hex digits with at least one
--      digit (hashes, addresses, object ids)                -> <hex>
--   5. numbers (ids, counts, durations, ports, addresses: 42, 3.5,
--      10.0.0.7)                                            -> <n>
--   6. runs of white space become one space; trimmed; at most 300
--      characters.
-- "job 4711 failed: connection to 'db-1' refused after 3.5s" and "job 12
-- failed: connection to 'db-2' refused after 1s" are both "job <n> failed:
-- connection to <str> refused after <n>s". IMMUTABLE: it is a stored
-- column's expression (dead_letter_jobs.fingerprint), computed once when
-- the dead letter is written.
CREATE OR REPLACE FUNCTION actor_worker_error_fingerprint(message text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT left(btrim(regexp_replace(
    regexp_replace(
      regexp_replace(
        regexp_replace(
          regexp_replace(
            regexp_replace(left(coalesce(message, ''), 1000),
              '(?<![[:alnum:]])(''[^''\n]*''|"[^"\n]*"|`[^`\n]*`)', '<str>', 'g'),
            '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}',
            '<uuid>', 'g'),
          '[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?',
          '<time>', 'g'),
        '\m(0[xX][0-9a-fA-F]+|(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,})\M', '<hex>', 'g'),
      '[0-9]+([.][0-9]+)*', '<n>', 'g'),
    '\s+', ' ', 'g')), 300)
$$;
