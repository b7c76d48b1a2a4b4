-- Whether this transaction may take lane batch p_batch back: it takes the
-- batch's advisory lock exclusively, for the rest of the transaction, when
-- no one holds it (the key of actor_worker_share_batches), and says
-- whether it got it. A batch some transactional group holds is passed by,
-- as a locked row is by SKIP LOCKED; the next rescue looks at it again.
-- (LANGUAGE sql, one expression: inlined into the caller's plan.)
CREATE OR REPLACE FUNCTION actor_worker_try_batch(p_batch bigint)
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
  SELECT pg_try_advisory_xact_lock((-1822077317 # (p_batch >> 32))::integer,
                                   ((p_batch & 4294967295) - 2147483648)::integer)
$$;
