-- A unique job is never on a lane: the unique index needs its real state.
-- It lives in job_rows_main, the partition that has the unique index (a
-- partitioned table cannot arbitrate ON CONFLICT on it; 019).
INSERT INTO job_rows_main (kind, queue, args, state, priority, run_at,
                      max_attempts, metadata, tags, deadline_ms, ordering_key,
                      unique_key, unique_states, ready_xid)
SELECT e.doc->>'kind', e.doc->>'queue', e.doc->'args', s.state,
       (e.doc->>'priority')::integer, s.run_at,
       (e.doc->>'max_attempts')::integer, e.doc->'metadata',
       ARRAY(SELECT jsonb_array_elements_text(e.doc->'tags')),
       (e.doc->>'deadline_ms')::bigint, e.doc->>'ordering_key', $2,
       $3::text[], NULL
  FROM (SELECT $1::jsonb AS doc) AS e,
       LATERAL (SELECT t.run_at,
                       CASE WHEN t.run_at > now() THEN 'scheduled'
                            ELSE 'available' END AS state
                  FROM (SELECT coalesce((e.doc->>'run_at')::timestamptz,
                                        now() + (e.doc->>'delay_ms')::bigint
                                                * interval '1 millisecond')
                                 AS run_at) AS t) AS s
ON CONFLICT (unique_key)
   WHERE unique_key IS NOT NULL
     AND actor_worker_unique_active(state, unique_states)
   DO NOTHING
RETURNING id
