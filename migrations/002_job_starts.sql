-- Which claimed jobs' handlers started (issue: a crash must charge only
-- those). A worker claims more jobs than it runs at once and holds the
-- rest in a local buffer; when it dies, the rescue charges the jobs
-- recorded here and gives the others back uncharged.
--
-- A worker records the jobs it started a moment after they start
-- (defaults::start_record_delay), one row per batch, never per job, so
-- this costs a few statements a second whatever the throughput. A job
-- started in that moment before its worker died is not recorded yet: the
-- rescue gives it back uncharged but sets start_unknown, and the claim
-- that takes it next records its start before its handler can run, so a
-- job that kills its worker is still charged, one crash later.
CREATE TABLE job_starts (
  -- The claim (job_batches.id) the jobs were started under.
  batch_id bigint      NOT NULL,
  ids      bigint[]    NOT NULL,
  at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_starts_batch_idx ON job_starts (batch_id);
CREATE INDEX job_starts_at_idx ON job_starts (at);

-- Set by a rescue that gave the job back uncharged without knowing
-- whether its handler had started; the next claim records its start at
-- once (actor_worker_claim_rows) and clears it.
ALTER TABLE jobs ADD COLUMN start_unknown boolean NOT NULL DEFAULT false;
