-- A transactional group's transaction (job_store::transact) holds the
-- leases of its lane jobs without writing them: job $3[i] is still on its
-- lane in batch $2[i] of worker $1 (the batch's range, no receipt for it:
-- the predicate actor_worker_materialize moves by), and its row is locked.
-- Returns the ids held. Nothing is written to the rows: a completion
-- becomes a receipt at the commit, as on the batched path (any other
-- outcome materializes the job in the same transaction). The locks keep
-- every other writer of these jobs waiting until the transaction ends,
-- and each of them looks afresh after the wait (actor_worker_materialize
-- locks before it reads the receipts), so it finds the receipt, or the job
-- still on its lane if the transaction rolled back. The batches are held
-- FOR KEY SHARE (actor_worker_live_batches): a rescue passes them by.
SELECT j.id
  FROM actor_worker_live_batches($1, $2::bigint[]) AS l
  JOIN unnest($2::bigint[], $3::bigint[]) AS u(batch, id) ON u.batch = l.id
  JOIN jobs_in AS j ON j.id = u.id
 WHERE j.id = ANY ($3::bigint[])
   AND j.state = 'available' AND j.ready_xid <> '0'
   AND j.queue = l.queue AND j.priority = l.priority
   AND (j.ready_xid, j.id) >= (l.first_xid, l.first_id)
   AND (j.ready_xid, j.id) <= (l.to_xid, l.to_id)
   AND pg_visible_in_snapshot(j.ready_xid, l.tick_hi)
   AND NOT pg_visible_in_snapshot(j.ready_xid, l.tick_lo)
   AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                    WHERE r.batch_id = l.id AND r.bucket = j.id >> 6
                      AND actor_worker_has_bit(r.mask, j.id))
 ORDER BY j.id
   FOR NO KEY UPDATE OF j
