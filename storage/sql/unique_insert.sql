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
