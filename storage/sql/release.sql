-- Row-per-state jobs back to available; jobs that never started give
-- their attempt back ($4 false).
WITH released AS (
  UPDATE job_rows
     SET state = 'available', locked_by = NULL, locked_at = NULL,
         deadline_at = NULL,
         attempt = attempt - CASE WHEN $4 THEN 0 ELSE 1 END
   WHERE id = ANY($1::bigint[]) AND (state = 'running') IS TRUE
     AND locked_by = $2
  RETURNING queue
), woken AS (
  SELECT pg_notify($3, q.queue) FROM (SELECT DISTINCT queue FROM released) AS q
)
SELECT (SELECT count(*) FROM released) AS released,
       (SELECT count(*) FROM woken) AS woken
