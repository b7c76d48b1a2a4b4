-- 011: COPY into jobs_in at the rate of a plain table. The insert trigger
-- (actor_worker_jobs_inserted) loses its transition table, which made
-- PostgreSQL insert every row of a COPY into the partitioned table one by
-- one instead of in batches; it finds the rows it needs by this index
-- instead. Only a row a lane cannot hand out has an entry: not
-- 'available', a run_at or created_at of its own (run_at <> created_at: a
-- job inserted with neither has both from now()), an ordering or unique
-- key. What nearly every insert writes costs it nothing.
DROP TRIGGER jobs_inserted ON jobs_in;
CREATE INDEX jobs_arrivals_idx ON jobs_in (ready_xid)
  WHERE ready_xid <> '0'
    AND (state <> 'available' OR run_at <> created_at
         OR ordering_key IS NOT NULL OR unique_key IS NOT NULL);
CREATE TRIGGER jobs_inserted
  AFTER INSERT ON jobs_in
  FOR EACH STATEMENT EXECUTE FUNCTION actor_worker_jobs_inserted();
