-- Seconds since each claimed job became due (its run_at), for the pickup
-- latency histogram. Read only when metrics are on: one index lookup per
-- claimed job.
SELECT id, extract(epoch FROM clock_timestamp() - run_at)::float8 AS waited
  FROM jobs_in WHERE id = ANY ($1::bigint[])
