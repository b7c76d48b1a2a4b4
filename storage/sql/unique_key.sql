-- A unique job: the key is a SHA-256 of kind, args (jsonb text is
-- canonical: keys sorted), optionally queue and period bucket.
SELECT encode(sha256(convert_to(
         $1 || chr(31) || $2::jsonb::text || chr(31)
         || CASE WHEN $3 THEN $4 ELSE '' END || chr(31)
         || CASE WHEN $5::bigint > 0
                 THEN floor(extract(epoch FROM now()) * 1000 / $5::bigint)::bigint::text
                 ELSE '' END, 'UTF8')), 'hex') AS key
