-- Holds lane batches p_batches for the rest of the transaction against
-- their take-back: a transaction-scoped advisory lock each, shared, in id
-- order, in the two-key space (-1822077317 # the id's high 32 bits, its low
-- 32 bits); -1822077317 is hashtext('actor_worker.batch'). Every
-- take-back (actor_worker_rescue, leases.sql:take_back_orphans) first
-- tries the same lock exclusively (actor_worker_try_batch, the same key)
-- and passes a batch by while anyone shares it, as FOR UPDATE SKIP LOCKED
-- passes by a batch row held FOR KEY SHARE. A transactional group's
-- transaction holds its batches so (actor_worker_transactional_begin): a
-- row lock held for as long as handlers run, by several groups at once,
-- made a MultiXact of every group's lock on one batch (read, grown and
-- written again by each), and a WAL record each.
CREATE OR REPLACE FUNCTION actor_worker_share_batches(p_batches bigint[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(
            (-1822077317 # (x.id >> 32))::integer,
            ((x.id & 4294967295) - 2147483648)::integer)
     FROM (SELECT DISTINCT u.id FROM unnest(p_batches) AS u(id)) AS x
    ORDER BY x.id;
END
$$;
