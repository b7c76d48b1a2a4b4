-- A worker's open batches, by worker: lane batches not finished, and row
-- batches until the first take-back or rescue that looks at them marks
-- them finished (no running row left) or rescued. What its heartbeat looks for
-- (claims it made but does not hold: storage/sql/take_back_orphans.sql),
-- and what its graceful stop (node_leave.sql) and the rescue
-- (actor_worker_rescue) look at. job_batches_worker_idx also holds every
-- finished batch until its ring slot is emptied, so those reads walked all
-- the batches the worker had claimed in the slot, for as long as the slot
-- stays current (hours): 50 ms a heartbeat at 200,000 batches.
CREATE INDEX job_batches_unfinished_idx ON job_batches (worker, id)
  WHERE rescued_at IS NULL AND finished_at IS NULL;
