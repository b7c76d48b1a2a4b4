-- A transactional handler's transaction (job_store::transact) holds its
-- run's lease: job $2 is still a running row of batch $3 of worker $1 (a
-- lane job was made one by actor_worker_materialize just before), and no
-- rescue took the batch back. The row lock keeps everything else that
-- would finish or move the job (a release, a rescue, an outcome recorded
-- the usual way) waiting until this transaction ends; they then find the
-- row finished, or still running if it rolled back. FOR KEY SHARE of the
-- batch makes a rescue (FOR UPDATE SKIP LOCKED) pass it by, as while an
-- outcome commits. A row while the lease holds.
SELECT j.id
  FROM jobs_in AS j
  JOIN job_batches AS b ON b.id = j.batch_id
 WHERE j.id = $2 AND j.batch_id = $3 AND j.state = 'running'
   AND b.worker = $1 AND b.rescued_at IS NULL
   FOR NO KEY UPDATE OF j
   FOR KEY SHARE OF b
