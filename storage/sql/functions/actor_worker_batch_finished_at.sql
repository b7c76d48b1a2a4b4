-- When lane batch p_batch (of p_size jobs) finished: the time of its last
-- receipt once its receipts hold all its jobs; NULL while any is
-- unfinished.
CREATE OR REPLACE FUNCTION actor_worker_batch_finished_at(p_batch bigint,
                                                          p_size integer)
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
  SELECT CASE WHEN actor_worker_batch_done(p_batch) >= p_size THEN max(r.at) END
    FROM batch_receipts AS r
   WHERE r.batch_id = p_batch
$$;
