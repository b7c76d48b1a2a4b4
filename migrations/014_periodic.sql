-- 014_periodic: the ticks of the [periodic.NAME] schedules, one row per
-- schedule.
--
-- A scheduler enqueues tick T of schedule S in one transaction with an
-- upsert of S's row that only succeeds while last_tick < T (see
-- storage/sql/periodic_claim_tick.sql): two schedulers on the same tick
-- (two leaders for a moment, or every node before leader election) meet
-- on this row's primary key; the second waits for the first to commit,
-- finds last_tick = T and enqueues nothing. last_tick only moves forward,
-- so no tick at or before it is ever enqueued again.
--
-- spec is the cron expression and time zone the ticks were computed
-- from: a scheduler whose configuration gives another spec treats the
-- schedule as new (no catch-up of the old one's ticks). Rows of schedules
-- removed from the configuration stay (listed by `actor-worker periodic`
-- as not configured); deleting one by hand only forgets its history.
CREATE TABLE periodic_schedules (
  name        text        PRIMARY KEY,
  spec        text        NOT NULL,
  -- The latest tick enqueued (the instant the cron expression named).
  last_tick   timestamptz NOT NULL,
  -- The job enqueued for it (the job may have finished and been deleted
  -- since).
  last_job_id bigint      NOT NULL,
  -- When that job was enqueued (the database's clock).
  enqueued_at timestamptz NOT NULL DEFAULT now()
);
