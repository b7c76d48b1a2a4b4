-- Jobs whose handlers started ($2 ids; $1 their leases, the ids of the
-- claims in job_batches), so that the rescue of a worker that dies
-- charges them and gives the jobs it only buffered back uncharged
-- (migrations/002_job_starts.sql): one row per claim.
INSERT INTO job_starts (batch_id, ids)
SELECT u.batch, array_agg(u.id)
  FROM unnest($1::bigint[], $2::bigint[]) AS u(batch, id)
 GROUP BY u.batch
