WITH runs AS (
  SELECT * FROM unnest($1::bigint[], $5::integer[]) AS r(id, attempt)
), done AS (
  DELETE FROM job_rows AS j
   USING runs
   WHERE j.id = ANY($1::bigint[]) AND j.id = runs.id
     AND j.attempt = runs.attempt
     AND (j.state = 'running') IS TRUE AND j.locked_by = $2
  RETURNING j.id, j.queue, j.ordering_key,
            CASE WHEN j.kind = ANY($3::text[])
                 THEN (actor_worker_row_json(j) || jsonb_build_object(
                         'state', 'completed', 'finalized_at', now(),
                         'deadline_at', NULL))::text END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) AS woken FROM done
