-- Completions of row-claimed jobs ($1 ids, $5 their leases), one statement
-- per batch: each only while its row is still running in that claim. A
-- finished job with an ordering key unblocks the next job of its key: wake
-- that queue's pollers (channel $4) rather than leave it to the idle poll.
-- $2: the worker (for the events); $3: the observed kinds.
WITH runs AS (
  SELECT * FROM unnest($1::bigint[], $5::bigint[]) AS r(id, lease)
), done AS (
  UPDATE jobs_in AS j
     SET state = 'completed', finalized_at = now()
    FROM runs
   WHERE j.id = runs.id AND j.batch_id = runs.lease AND j.state = 'running'
  RETURNING j.id, j.queue, j.ordering_key,
            CASE WHEN j.kind = ANY ($3::text[])
                 THEN actor_worker_job_json(j.id, jsonb_build_object(
                        'state', 'completed', 'finalized_at', now(),
                        'locked_by', $2::text)) END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) AS woken FROM done
