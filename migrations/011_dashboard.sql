-- 011_dashboard: what the web dashboard ([http] listen, app/dashboard.hpp)
-- needs from the schema: error fingerprints of dead letters, the audit log of
-- its actions, and one index for its job lists.

-- An error message with what varies from one occurrence to the next taken
-- out, so failures of the same cause group together (the dashboard's
-- "Failures" page, by kind and fingerprint). Applied in this order, on the
-- first 1,000 characters:
--   1. quoted values ('...', "...", `...`; a quote inside a word, as in
--      "can't", does not start one)                        -> <str>
--   2. UUIDs                                               -> <uuid>
--   3. timestamps (2026-12-01T10:09:57.495Z, 2026-12-01 10:09:57+02)
--                                                          -> <time>
--   4. hex: 0x... and words of 8 or more hex digits with at least one
--      digit (hashes, addresses, object ids)                -> <hex>
--   5. numbers (ids, counts, durations, ports, addresses: 42, 3.5,
--      10.0.0.7)                                            -> <n>
--   6. runs of white space become one space; trimmed; at most 300
--      characters.
-- "job 4711 failed: connection to 'db-1' refused after 3.5s" and "job 12
-- failed: connection to 'db-2' refused after 1s" are both "job <n> failed:
-- connection to <str> refused after <n>s". IMMUTABLE: it is a stored
-- column's expression, computed once when the dead letter is written.
CREATE FUNCTION actor_worker_error_fingerprint(message text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT left(btrim(regexp_replace(
    regexp_replace(
      regexp_replace(
        regexp_replace(
          regexp_replace(
            regexp_replace(left(coalesce(message, ''), 1000),
              '(?<![[:alnum:]])(''[^''\n]*''|"[^"\n]*"|`[^`\n]*`)', '<str>', 'g'),
            '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}',
            '<uuid>', 'g'),
          '[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]+)?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?',
          '<time>', 'g'),
        '\m(0[xX][0-9a-fA-F]+|(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,})\M', '<hex>', 'g'),
      '[0-9]+([.][0-9]+)*', '<n>', 'g'),
    '\s+', ' ', 'g')), 300)
$$;

-- Every dead letter's fingerprint, written with it (a stored generated
-- column: writers of dead letters need not know it).
ALTER TABLE dead_letter_jobs ADD COLUMN fingerprint text
  GENERATED ALWAYS AS (actor_worker_error_fingerprint(last_error_message)) STORED;

-- The failure groups (count, first and last seen) read this index only,
-- and a group's dead letters are listed through it in id order. Dead
-- letters are written rarely: the index costs the hot path nothing.
CREATE INDEX dead_letter_jobs_fingerprint_idx
  ON dead_letter_jobs (kind, fingerprint, id) INCLUDE (failed_at);

-- Finished rows off the lanes (scheduled, retried, ordered or unique jobs
-- that completed, and every cancelled job), in id order: the dashboard
-- lists them newest first a page at a time. jobs_finalized_idx holds the
-- same rows in finalized_at order, which would need all of them sorted per
-- page. Lane jobs are never in it (their rows stay 'available' after they
-- complete), so the claim and completion of plain jobs pay nothing for it.
CREATE INDEX job_rows_finished_idx ON job_rows (state, id)
  WHERE state IN ('completed', 'cancelled') AND ready_xid IS NULL;

-- What the dashboard's actions did: one row per action, written in the
-- same transaction as the action itself (an action that rolls back leaves
-- no row). Kept until deleted by hand.
--   action:      job.retry, job.cancel, dead_letter.retry,
--                dead_letter.purge
--   target:      what it was asked to act on: {"job_id": 42},
--                {"dead_letter_id": 7}, or the filter of a bulk action
--                ({"queue": "mail", "kind": "send", "fingerprint": "..."})
--   affected:    how many jobs or dead letters it changed
--   job_ids:     the jobs it changed (for a dead letter retry the new
--                jobs, for a purge the purged dead letters' original jobs);
--                the first 1,000
--   outcome:     what happened, in words ("retried", "cancel requested",
--                "refused: the job is running")
--   remote_addr, user_agent: where the request came from
--   worker:      the node that served it (its jobs.locked_by value)
CREATE TABLE audit_log (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at          timestamptz NOT NULL DEFAULT now(),
  action      text        NOT NULL,
  target      jsonb       NOT NULL DEFAULT '{}',
  affected    bigint      NOT NULL DEFAULT 0,
  job_ids     bigint[]    NOT NULL DEFAULT '{}',
  outcome     text        NOT NULL DEFAULT '',
  remote_addr text        NOT NULL DEFAULT '',
  user_agent  text        NOT NULL DEFAULT '',
  worker      text        NOT NULL DEFAULT ''
);
