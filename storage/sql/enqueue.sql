-- Enqueueing through the API (storage/enqueue.hpp); applications may also
-- INSERT or COPY into jobs_in (docs/sql.md).

-- name: enqueue
-- All rows travel as one JSON array parameter: one statement and one
-- round trip however many jobs, and no SQL is ever built from values. A
-- job due at once without an ordering key goes on its queue's lane; the
-- insert trigger puts the others off the lanes (actor_worker_jobs_inserted),
-- where they are claimed as rows when due, and wakes their queues as it
-- does for any insert.
INSERT INTO jobs_in (kind, queue, args, state, priority, run_at, max_attempts,
                  metadata, tags, deadline_ms, ordering_key)
SELECT r.kind, r.queue, r.args,
       CASE WHEN r.run_at > now() THEN 'scheduled' ELSE 'available' END,
       r.priority, r.run_at, r.max_attempts, r.metadata, r.tags, r.deadline_ms,
       r.ordering_key
  FROM (SELECT e.doc->>'kind' AS kind,
               e.doc->>'queue' AS queue,
               e.doc->'args' AS args,
               (e.doc->>'priority')::integer AS priority,
               coalesce((e.doc->>'run_at')::timestamptz,
                        now() + (e.doc->>'delay_ms')::bigint
                                * interval '1 millisecond') AS run_at,
               (e.doc->>'max_attempts')::integer AS max_attempts,
               e.doc->'metadata' AS metadata,
               ARRAY(SELECT jsonb_array_elements_text(e.doc->'tags')) AS tags,
               (e.doc->>'deadline_ms')::bigint AS deadline_ms,
               e.doc->>'ordering_key' AS ordering_key,
               e.ord
          FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(doc, ord)) AS r
 ORDER BY r.ord
RETURNING id

-- name: enqueue_plain
-- The bulk path for jobs with nothing but kind, queue, args and priority
-- (due at once, default everything else): one array per column, which the
-- server reads far faster than a JSON document per row. Such jobs always
-- go on their queue's lane.
INSERT INTO jobs_in (kind, queue, args, priority)
SELECT u.kind, u.queue, u.args, u.priority
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::integer[])
       AS u(kind, queue, args, priority)
RETURNING id

-- name: enqueue_ids
-- $1 new job ids, ascending, from the sequence of jobs.id: a bulk enqueue
-- by COPY (which returns nothing) takes its ids first.
SELECT nextval(pg_get_serial_sequence('jobs_in', 'id')) AS id
  FROM generate_series(1, $1::bigint)
 ORDER BY 1

-- name: unique_key
-- A unique job: the key is a SHA-256 of kind, args (jsonb text is
-- canonical: keys sorted), optionally queue and period bucket.
SELECT encode(sha256(convert_to(
         $1 || chr(31) || $2::jsonb::text || chr(31)
         || CASE WHEN $3 THEN $4 ELSE '' END || chr(31)
         || CASE WHEN $5::bigint > 0
                 THEN floor(extract(epoch FROM now()) * 1000 / $5::bigint)::bigint::text
                 ELSE '' END, 'UTF8')), 'hex') AS key

-- name: unique_insert
-- A unique job (its key $2, its unique states $3): into jobs_unique, the
-- partition with the unique index, which ON CONFLICT names as its
-- arbiter (on `jobs` itself only ON CONFLICT DO NOTHING without a target
-- works: docs/sql.md). Never on a lane: the index needs its real state.
-- The partition has no identity of its own: the id comes from jobs'.
INSERT INTO jobs_unique (id, kind, queue, args, state, priority, run_at,
                         max_attempts, metadata, tags, deadline_ms,
                         ordering_key, unique_key, unique_states, ready_xid)
SELECT nextval(pg_get_serial_sequence('jobs_in', 'id')),
       e.doc->>'kind', e.doc->>'queue', e.doc->'args', s.state,
       (e.doc->>'priority')::integer, s.run_at,
       (e.doc->>'max_attempts')::integer, e.doc->'metadata',
       ARRAY(SELECT jsonb_array_elements_text(e.doc->'tags')),
       (e.doc->>'deadline_ms')::bigint, e.doc->>'ordering_key', $2,
       $3::text[], '0'
  FROM (SELECT $1::jsonb AS doc) AS e,
       LATERAL (SELECT t.run_at,
                       CASE WHEN t.run_at > now() THEN 'scheduled'
                            ELSE 'available' END AS state
                  FROM (SELECT coalesce((e.doc->>'run_at')::timestamptz,
                                        now() + (e.doc->>'delay_ms')::bigint
                                                * interval '1 millisecond')
                                 AS run_at) AS t) AS s
ON CONFLICT (unique_key)
   WHERE actor_worker_unique_active(state, unique_states)
   DO NOTHING
RETURNING id

-- name: unique_existing
-- The job that holds unique key $1 now.
SELECT id FROM jobs_unique
 WHERE unique_key = $1 AND actor_worker_unique_active(state, unique_states)
