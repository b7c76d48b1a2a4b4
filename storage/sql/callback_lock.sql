-- The job of callback $1, locked for its resolution: its state as written,
-- and whether the run that registered the id while it ran (callback_lease)
-- still holds it (the predicate of callback_register.sql: its batch not
-- rescued, the job a running row of it or still on the lane in it), so
-- that a resolution can be kept until that run parks the job. The lock
-- orders a resolution and a park: whichever comes second sees the other.
SELECT j.id, j.state, j.callback_early IS NOT NULL AS kept,
       coalesce(j.callback_lease IS NOT NULL
       AND EXISTS (SELECT 1 FROM job_batches AS b
                    WHERE b.id = j.callback_lease AND b.rescued_at IS NULL)
       AND ((j.batch_id = j.callback_lease AND j.state = 'running')
            OR ((j.callback_lease & 1) = 1 AND j.ready_xid <> '0'
                AND j.state = 'available'
                AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                                 WHERE r.batch_id = j.callback_lease
                                   AND r.bucket = j.id >> 6
                                   AND actor_worker_has_bit(r.mask, j.id)))), false)
         AS running
  FROM jobs_in AS j
 WHERE j.callback_id = $1::uuid
   FOR UPDATE OF j
