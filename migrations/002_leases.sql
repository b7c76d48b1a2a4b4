-- 002_leases: per-job deadlines, and an index for the lease keeper that
-- heartbeats do not touch.

-- The run-time limit given at enqueue (NULL: the queue's default, if any),
-- and the deadline of the current run, set at claim.
ALTER TABLE jobs
  ADD COLUMN deadline_ms bigint CHECK (deadline_ms IS NULL OR deadline_ms > 0),
  ADD COLUMN deadline_at timestamptz;

-- Heartbeats rewrite locked_at every few seconds for every running job. An
-- index on locked_at would make each of those a non-HOT update with a new
-- index entry; index the running rows by owner instead (a claim changes
-- locked_by anyway) and let the rescue filter locked_at on the few running
-- rows.
DROP INDEX jobs_running_idx;
CREATE INDEX jobs_running_idx ON jobs (locked_by) WHERE state = 'running';
