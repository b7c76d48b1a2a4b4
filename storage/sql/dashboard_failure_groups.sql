-- The dashboard's failures: dead letters grouped by kind and error
-- fingerprint (migrations/011_dashboard.sql), the $1 largest groups, each
-- with its count, when its first and last dead letters failed, and the
-- newest one's message and queue, as one JSON array. The grouping reads
-- dead_letter_jobs_fingerprint_idx only (failed_at is included in it).
SELECT coalesce(json_agg(json_build_object(
         'kind', g.kind, 'fingerprint', g.fingerprint, 'count', g.n,
         'first_seen', g.first_seen, 'last_seen', g.last_seen,
         'example', left(l.last_error_message, 1000),
         'example_queue', l.queue, 'example_id', l.id)
         ORDER BY g.n DESC, g.last_id DESC), '[]')::text AS groups
  FROM (SELECT d.kind, d.fingerprint, count(*) AS n,
               min(d.failed_at) AS first_seen, max(d.failed_at) AS last_seen,
               max(d.id) AS last_id
          FROM dead_letter_jobs AS d
         GROUP BY d.kind, d.fingerprint
         ORDER BY count(*) DESC, max(d.id) DESC
         LIMIT $1) AS g
  JOIN dead_letter_jobs AS l ON l.id = g.last_id
