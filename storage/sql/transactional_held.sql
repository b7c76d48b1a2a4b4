-- After a transactional handler's COMMIT got no reply (job_store::transact,
-- once the server process that sent it is gone): does lease $3 of worker
-- $1 still hold job $2? It does while the job is a running row of that
-- batch, or (a lane batch, bit 0 of the id) still on the lane in it, no
-- receipt naming it: then the commit did not happen. Otherwise the job
-- left the batch, and only that commit could have moved it: this worker
-- still heartbeats the batch, so no rescue took it, and the lock on its
-- row kept every other writer out while the transaction was open.
SELECT EXISTS (
         SELECT 1 FROM jobs_in AS j
          WHERE j.id = $2 AND j.batch_id = $3 AND j.state = 'running')
       OR (($3::bigint & 1) = 1 AND EXISTS (
             SELECT 1 FROM job_batches AS b
              WHERE b.id = $3 AND b.worker = $1 AND b.rescued_at IS NULL)
           AND NOT EXISTS (
             SELECT 1 FROM batch_receipts AS r
              WHERE r.batch_id = $3 AND r.bucket = $2::bigint >> 6
                AND actor_worker_has_bit(r.mask, $2))) AS held
