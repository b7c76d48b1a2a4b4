-- The ring no longer keeps rows outside its slots. What a slot still needs
-- when the ring empties it is carried into the current slot
-- (actor_worker_recycle), so no job, batch or receipt is ever deleted row
-- by row: rows deleted one by one stay, dead, in every index scan while a
-- transaction is open anywhere in the database, and a claim's probe of the
-- lane index walked 200,000 of them. The partitions for slot -1 go; the
-- rows a database already keeps there move into the current slot first
-- (the one statement here that is not DDL: dropping them would lose jobs).
UPDATE jobs_ring SET slot = actor_worker_slot() WHERE slot = -1;
UPDATE job_batches SET slot = actor_worker_slot() WHERE slot = -1;
UPDATE batch_receipts SET slot = actor_worker_slot() WHERE slot = -1;
DROP TABLE jobs_kept, job_batches_kept, batch_receipts_kept;
-- The recycle now carries at most so many jobs a round.
DROP FUNCTION IF EXISTS actor_worker_recycle(interval);
