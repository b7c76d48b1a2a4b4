-- Completions of row-per-state jobs, one statement per batch. `(state =
-- 'running') IS TRUE` is `state = 'running'` that the planner cannot match
-- to the partial running-jobs index: a batch must look its ids up by
-- primary key, not scan every running row of the worker and test each
-- against the array (3x slower at 500 running jobs, measured). A finished
-- job with an ordering key unblocks the next job of its key: wake that
-- queue's pollers rather than leave the next one to the idle poll.
WITH runs AS (
  SELECT * FROM unnest($1::bigint[], $5::integer[]) AS r(id, attempt)
), done AS (
  UPDATE job_rows AS j SET state = 'completed', finalized_at = now(),
                           deadline_at = NULL
    FROM runs
   WHERE j.id = ANY($1::bigint[]) AND j.id = runs.id
     AND j.attempt = runs.attempt
     AND (j.state = 'running') IS TRUE AND j.locked_by = $2
  RETURNING j.id, j.queue, j.ordering_key,
            CASE WHEN j.kind = ANY($3::text[])
                 THEN actor_worker_row_json(j)::text END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) AS woken FROM done
