-- Locks jobs p_ids for the rest of the transaction, in id order, without
-- writing their rows: a transaction-scoped advisory lock per job, in the
-- two-key space (912978280 # the id's high 32 bits, its low 32 bits);
-- 912978280 is hashtext('actor_worker.job'). A transactional group holds
-- its lane jobs this way (actor_worker_transactional_begin) while their
-- handlers run, and every other writer of a lane job that may be in a live
-- batch takes the same locks before it reads the receipts
-- (actor_worker_materialize), so it waits for the group's commit and
-- then finds its completion. A row lock would do the same, but it dirties
-- the job's page: a WAL record and, first after each checkpoint, a full
-- page image per page of jobs, where a lane job's row is otherwise never
-- written (about 230 of a transactional job's 460 bytes of WAL).
CREATE OR REPLACE FUNCTION actor_worker_lock_lane_jobs(p_ids bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
BEGIN
  -- (PL/pgSQL, not SQL: a SQL function plans its statement on every call,
  -- 160 us here.)
  PERFORM pg_advisory_xact_lock((912978280 # (x.id >> 32))::integer,
                                ((x.id & 4294967295) - 2147483648)::integer)
     FROM (SELECT DISTINCT u.id FROM unnest(p_ids) AS u(id)) AS x
    ORDER BY x.id;
END
$$;
