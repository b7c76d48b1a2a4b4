-- complete.sql with completed_retention 0: the rows go at once.
WITH runs AS (
  SELECT * FROM unnest($1::bigint[], $5::bigint[]) AS r(id, lease)
), done AS (
  DELETE FROM jobs_in AS j
   USING runs
   WHERE j.id = runs.id AND j.batch_id = runs.lease AND j.state = 'running'
  RETURNING j.id, j.queue, j.ordering_key,
            CASE WHEN j.kind = ANY ($3::text[])
                 THEN (to_jsonb(j) - 'ready_xid' - 'batch_id' - 'slot'
                       || jsonb_build_object('state', 'completed',
                                             'finalized_at', now(),
                                             'locked_by', $2::text,
                                             'locked_at', NULL))::text END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) AS woken FROM done
