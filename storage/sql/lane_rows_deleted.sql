-- The same when completed rows are deleted at once: read before the
-- delete, as they will have been (packed jobs from their packs).
SELECT id, (to_jsonb(j) || jsonb_build_object('state', 'completed',
                                              'finalized_at', now()))::text
         AS row_json
  FROM (SELECT * FROM jobs WHERE id = ANY($1::bigint[])
        UNION ALL
        SELECT * FROM actor_worker_packed_jobs($1::bigint[])) AS j
