-- The dashboard's failures: dead letters grouped by kind and error
-- fingerprint (migrations/011_dashboard.sql), the $1 largest groups, each
-- with its count, when its first and last dead letters failed, and the
-- newest one's message and queue, as one JSON array. The groups are found
-- by a loose scan of dead_letter_jobs_fingerprint_idx and each is counted
-- from it alone (failed_at is included in it): no sort or hash of the
-- table, whatever the planner thinks of a GROUP BY.
WITH RECURSIVE groups AS (
  (SELECT d.kind, d.fingerprint FROM dead_letter_jobs AS d
    ORDER BY d.kind, d.fingerprint LIMIT 1)
  UNION ALL
  SELECT n.kind, n.fingerprint
    FROM groups AS g,
         LATERAL (SELECT d.kind, d.fingerprint FROM dead_letter_jobs AS d
                   WHERE (d.kind, d.fingerprint) > (g.kind, g.fingerprint)
                   ORDER BY d.kind, d.fingerprint LIMIT 1) AS n
), counted AS (
  SELECT g.kind, g.fingerprint, s.n, s.first_seen, s.last_seen, s.last_id
    FROM groups AS g,
         LATERAL (SELECT count(*) AS n, min(d.failed_at) AS first_seen,
                         max(d.failed_at) AS last_seen, max(d.id) AS last_id
                    FROM dead_letter_jobs AS d
                   WHERE d.kind = g.kind AND d.fingerprint = g.fingerprint) AS s
   ORDER BY s.n DESC, s.last_id DESC
   LIMIT $1
)
SELECT coalesce(json_agg(json_build_object(
         'kind', c.kind, 'fingerprint', c.fingerprint, 'count', c.n,
         'first_seen', c.first_seen, 'last_seen', c.last_seen,
         'example', left(l.last_error_message, 1000),
         'example_queue', l.queue, 'example_id', l.id)
         ORDER BY c.n DESC, c.last_id DESC), '[]')::text AS groups
  FROM counted AS c
  JOIN dead_letter_jobs AS l ON l.id = c.last_id
