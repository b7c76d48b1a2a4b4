-- The dashboard's reads and actions (docs/dashboard.md).

-- name: dashboard_jobs_state
-- Dashboard job list of state $2 below id $1, of queue $3 and kind $4 (''
-- = any): the newest $5 ids, newest first, as `jobs` shows them. The state
-- leaves only the view's branches that can hold it (sent with its
-- parameters, so planned for them), each read by an index in id order.
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT j.id FROM jobs AS j
         WHERE j.state = $2 AND j.id < $1
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
         ORDER BY j.id DESC
         LIMIT $5) AS h

-- name: dashboard_jobs_rows
-- The dashboard's list rows of jobs $1 (an array of ids), as jobs
-- shows them, newest first, as one JSON array: the columns a list shows,
-- the error cut to 300 characters, no args or metadata.
SELECT coalesce(json_agg(json_build_object(
         'id', j.id, 'state', j.state, 'queue', j.queue, 'kind', j.kind,
         'priority', j.priority, 'attempt', j.attempt,
         'max_attempts', j.max_attempts, 'error_count', j.error_count,
         'run_at', j.run_at, 'created_at', j.created_at,
         'finalized_at', j.finalized_at, 'locked_by', j.locked_by,
         'last_error_message', left(j.last_error_message, 300),
         'tags', j.tags)
         ORDER BY j.id DESC), '[]')::text AS rows
  FROM jobs AS j WHERE j.id = ANY ($1::bigint[])

-- name: dashboard_jobs_newest
-- Dashboard job list, any state: the newest jobs below id $1, of queue $2
-- and kind $3 ('' = any), at most $4, looking at no more than the $5 rows
-- below $1 (so a filter that matches little costs a bounded scan, not the
-- whole table). Returns the ids found (newest first), and the lowest id
-- looked at with how many were (fewer than $5: nothing below was left).
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT r.id FROM jobs_in AS r
           WHERE r.id < $1 ORDER BY r.id DESC LIMIT $5) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT r.id FROM jobs_in AS r
                 WHERE r.id < $1 AND r.id >= w.low
                   AND ($2 = '' OR r.queue = $2)
                   AND ($3 = '' OR r.kind = $3)
                 ORDER BY r.id DESC LIMIT $4) AS h) AS ids
  FROM scan AS w

-- name: dashboard_failure_groups
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

-- name: dashboard_dead_letters_count
-- How many dead letters a bulk action would take: dead letter $1 (0 =
-- any) of queue $2, kind $3 and fingerprint $4 ('' = any). Asked for
-- before a bulk action is confirmed, never to draw a page.
SELECT count(*) AS n FROM dead_letter_jobs AS d
 WHERE ($1::bigint = 0 OR d.id = $1::bigint)
   AND ($2 = '' OR d.queue = $2)
   AND ($3 = '' OR d.kind = $3)
   AND ($4 = '' OR d.fingerprint = $4)

-- name: dashboard_dead_letters_rows
-- The dashboard's list rows of dead letters $1 (an array of ids), newest
-- first, as one JSON array: no args or metadata, the error cut to 300
-- characters.
SELECT coalesce(json_agg(json_build_object(
         'id', d.id, 'original_job_id', d.original_job_id, 'kind', d.kind,
         'queue', d.queue, 'priority', d.priority, 'attempt', d.attempt,
         'max_attempts', d.max_attempts, 'error_count', d.error_count,
         'last_error_message', left(d.last_error_message, 300),
         'fingerprint', d.fingerprint, 'created_at', d.created_at,
         'failed_at', d.failed_at, 'tags', d.tags)
         ORDER BY d.id DESC), '[]')::text AS rows
  FROM dead_letter_jobs AS d
 WHERE d.id = ANY ($1::bigint[])

-- name: dashboard_dead_letters_newest
-- Dashboard dead letter list: the newest dead letters below id $1, of
-- queue $2, kind $3 and fingerprint $4 ('' = any), at most $5, looking at
-- no more than the $6 dead letters below $1. Returns as
-- dashboard_jobs_newest.sql does.
WITH scan AS (
  SELECT min(s.id) AS low, count(*) AS scanned
    FROM (SELECT d.id FROM dead_letter_jobs AS d
           WHERE d.id < $1 ORDER BY d.id DESC LIMIT $6) AS s
)
SELECT w.low, w.scanned,
       (SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}')
          FROM (SELECT d.id FROM dead_letter_jobs AS d
                 WHERE d.id < $1 AND d.id >= w.low
                   AND ($2 = '' OR d.queue = $2)
                   AND ($3 = '' OR d.kind = $3)
                   AND ($4 = '' OR d.fingerprint = $4)
                 ORDER BY d.id DESC LIMIT $5) AS h) AS ids
  FROM scan AS w

-- name: dashboard_dead_letters_group
-- Dashboard dead letter list of one failure group: kind $2 and fingerprint
-- $3 (of queue $4, '' = any), below id $1, the newest $5, through
-- dead_letter_jobs_fingerprint_idx in id order. Returns the ids.
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT d.id FROM dead_letter_jobs AS d
         WHERE d.kind = $2 AND d.fingerprint = $3 AND d.id < $1
           AND ($4 = '' OR d.queue = $4)
         ORDER BY d.id DESC LIMIT $5) AS h

-- name: dashboard_dead_letters_purge
-- The dashboard's purge: deletes dead letter $1 (0 = any) of queue $2,
-- kind $3 and fingerprint $4 ('' = any). Returns how many, and the first
-- 1,000 of their original jobs' ids (for the audit log).
WITH gone AS (
  DELETE FROM dead_letter_jobs AS d
   WHERE ($1::bigint = 0 OR d.id = $1::bigint)
     AND ($2 = '' OR d.queue = $2)
     AND ($3 = '' OR d.kind = $3)
     AND ($4 = '' OR d.fingerprint = $4)
  RETURNING d.id, d.original_job_id
)
SELECT count(*) AS n,
       coalesce((array_agg(g.original_job_id ORDER BY g.id))[1:1000], '{}')
         AS job_ids
  FROM gone AS g

-- name: dashboard_audit_insert
-- One audit log row of a dashboard action, in the action's transaction:
-- action $1, target $2 (JSON), affected $3, job ids $4, outcome $5, remote
-- address $6, user agent $7, worker $8.
INSERT INTO audit_log (action, target, affected, job_ids, outcome,
                       remote_addr, user_agent, worker)
VALUES ($1, $2::jsonb, $3, $4::bigint[], $5, $6, $7, $8)
RETURNING id

-- name: dashboard_audit_list
-- The newest audit log rows below id $1, at most $2, as one JSON array
-- (the first 20 job ids of each), with how many there are and the lowest
-- id (where the next page starts when the page is full).
WITH a AS (
  SELECT * FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2
)
SELECT coalesce(json_agg(json_build_object(
         'id', a.id, 'at', a.at, 'action', a.action, 'target', a.target,
         'affected', a.affected, 'job_ids', a.job_ids[1:20],
         'outcome', a.outcome, 'remote_addr', a.remote_addr,
         'user_agent', a.user_agent, 'worker', a.worker)
         ORDER BY a.id DESC), '[]')::text AS rows,
       count(*) AS n, min(a.id) AS low
  FROM a
