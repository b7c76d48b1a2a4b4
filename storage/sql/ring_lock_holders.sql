-- Who kept the ring's retention from emptying a slot (asked after its
-- LOCK TABLE waited past the lock timeout): the sessions that hold a lock
-- on a slot partition (a transaction that read or wrote jobs, still
-- open), longest-open first. An operator can end them; until they end,
-- the slot waits (nothing is lost, rows only stay longer).
SELECT a.pid, coalesce(nullif(a.application_name, ''), '-') AS application,
       a.state,
       extract(epoch FROM now() - coalesce(a.xact_start, now()))::bigint AS open_seconds
  FROM pg_stat_activity AS a
 WHERE a.pid <> pg_backend_pid()
   AND a.pid IN (SELECT l.pid FROM pg_locks AS l
                  JOIN pg_class AS c ON c.oid = l.relation
                 WHERE l.granted AND l.database = (SELECT oid FROM pg_database
                                                    WHERE datname = current_database())
                   AND c.relname ~ '^(jobs|job_batches|batch_receipts)_slot_[0-7]$')
 ORDER BY a.xact_start NULLS LAST
 LIMIT 5
