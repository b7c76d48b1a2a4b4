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
