-- Run $3 (a lease) of worker $1 registers a callback id for job $2 while
-- the job runs, timing out $4 ms from now (job_context::register_callback).
-- Only the run that holds the job may: a row-claimed job is a running row
-- of that batch; a lane job (bit 0 of the lease) is still on the lane, its
-- batch neither rescued nor holding a receipt for it. The lane row keeps
-- its lane state: the id and the lease are all that is written. FOR KEY
-- SHARE of the batch holds a rescue off until this commits. The id comes
-- from gen_random_uuid(), as at a park: unguessable. Returns it, or no
-- row when the run is no longer the job's.
WITH batch AS (
  SELECT b.id FROM job_batches AS b
   WHERE b.id = $3 AND b.worker = $1 AND b.rescued_at IS NULL
     FOR KEY SHARE
)
UPDATE jobs_in AS j
   SET callback_id = gen_random_uuid(),
       callback_timeout_at = now() + $4::bigint * interval '1 millisecond',
       callback_lease = $3, callback_early = NULL
 WHERE j.id = $2 AND EXISTS (SELECT 1 FROM batch)
   AND ((j.batch_id = $3 AND j.state = 'running')
        OR (($3::bigint & 1) = 1 AND j.ready_xid <> '0'
            AND j.state = 'available'
            AND NOT EXISTS (SELECT 1 FROM batch_receipts AS r
                             WHERE r.batch_id = $3 AND r.bucket = $2::bigint >> 6
                               AND actor_worker_has_bit(r.mask, $2))))
RETURNING j.callback_id::text AS callback_id
