-- A transactional group's transaction (job_store::transact) holds the
-- leases of its row-claimed jobs: each job $2[i] is still a running row of
-- batch $3[i] of worker $1, and no rescue took the batch back (lane jobs:
-- transactional_lane_lease.sql). Returns the ids it holds. The
-- row locks keep everything else that would finish or move those jobs (a
-- release, a rescue, an outcome recorded the usual way) waiting until this
-- transaction ends; they then find the rows finished, or still running if
-- it rolled back. FOR KEY SHARE of the batches makes a rescue (FOR UPDATE
-- SKIP LOCKED) pass them by, as while an outcome commits. `j.id = ANY`
-- finds the rows by the id index of each partition; id order locks them in
-- one order whatever the group.
SELECT j.id
  FROM unnest($2::bigint[], $3::bigint[]) AS u(id, batch)
  JOIN jobs_in AS j ON j.id = u.id AND j.batch_id = u.batch
  JOIN job_batches AS b ON b.id = j.batch_id
 WHERE j.id = ANY ($2::bigint[]) AND j.state = 'running'
   AND b.worker = $1 AND b.rescued_at IS NULL
 ORDER BY j.id
   FOR NO KEY UPDATE OF j
   FOR KEY SHARE OF b
