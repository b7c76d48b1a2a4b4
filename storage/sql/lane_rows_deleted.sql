-- The same when completed rows are deleted at once: read before the
-- delete, as they will have been.
SELECT id, (to_jsonb(j) || jsonb_build_object('state', 'completed',
                                              'finalized_at', now()))::text
         AS row_json
  FROM jobs AS j WHERE id = ANY($1::bigint[])
