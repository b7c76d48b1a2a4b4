-- 009_admin: what the admin CLI needs from the schema.
--
-- Cancelling a running job (`actor-worker jobs cancel ID`): the job belongs
-- to the worker that runs it, so the CLI does not write its state. It
-- records the request here and sends a NOTIFY on actor_worker_cancel (the
-- payload is the job id); the worker running the job cancels its handler's
-- token and records the outcome. The row is what makes the request
-- durable: a worker that missed the NOTIFY (its LISTEN connection was
-- away) finds it on its next heartbeat round. A request outlives the run
-- it was made for only while the job is unfinished (a rescued job that
-- runs again is cancelled then too); maintenance deletes requests whose job
-- finished or is gone, and `jobs retry` deletes the request of the job it
-- retries.
CREATE TABLE job_cancel_requests (
  job_id       bigint      PRIMARY KEY,
  requested_at timestamptz NOT NULL DEFAULT now()
);

-- Dead letters by queue and kind, for `dlq retry --all --queue Q --kind K`
-- and `dlq purge --queue Q`.
CREATE INDEX dead_letter_jobs_queue_kind_idx ON dead_letter_jobs (queue, kind);
