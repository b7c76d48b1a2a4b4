-- How many of lane batch p_batch's jobs its receipts hold (completed, or
-- gone off the lane): each counted once, however many receipts name it (an
-- outcome records only jobs no receipt holds yet, but one whose commit
-- got no reply may meet its retry). One probe of batch_receipts_batch_idx.
-- PL/pgSQL, so that its plan is made once per session.
CREATE OR REPLACE FUNCTION actor_worker_batch_done(p_batch bigint)
RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
  v_done bigint;
BEGIN
  SELECT coalesce(sum(actor_worker_bit_count(u.mask)), 0) INTO v_done
    FROM (SELECT bit_or(r.mask) AS mask FROM batch_receipts AS r
           WHERE r.batch_id = p_batch GROUP BY r.bucket) AS u;
  RETURN v_done;
END
$$;
