-- Retention (docs/storage.md, concept 7): the ring's recycle, the cleanup of
-- what lives outside it, and the vacuum of the queue tables.

-- name: recycle
-- The ring's retention (storage/sql/functions/actor_worker_recycle.sql):
-- empties the slot that came due, for completed_retention $1 s, carrying
-- at most $2 jobs it still needs into the current slot this round; what it
-- did, or NULL.
SELECT actor_worker_recycle(make_interval(secs => $1::double precision),
                            $2::integer) AS done

-- name: ring_period
-- Sets the ring's period to $1 s when it differs (the leader, from its
-- completed_retention: docs/storage.md); the old period, or no row when
-- it was already so.
WITH old AS (SELECT period FROM job_ring FOR UPDATE),
changed AS (
  UPDATE job_ring SET period = make_interval(secs => $1::double precision)
   WHERE period <> make_interval(secs => $1::double precision)
  RETURNING period
)
SELECT extract(epoch FROM old.period)::bigint AS old_seconds,
       actor_worker_ring_rebuild($1::bigint) AS rebuilt
  FROM old, changed

-- name: ring_lock_holders
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

-- name: cleanup
-- Retention of the unique jobs (the ring empties its slots whole:
-- recycle.sql): up to $2 finished jobs of jobs_unique whose retention
-- ($1 s) passed, oldest first. They are off the lanes (a unique job never
-- goes on one), so their own row says when they finished.
DELETE FROM jobs_in AS j
 WHERE j.id IN (
   SELECT g.id FROM jobs_in AS g
    WHERE g.unique_key IS NOT NULL
      AND g.ready_xid = '0' AND g.state IN ('completed', 'cancelled')
      AND g.finalized_at < now() - make_interval(secs => $1::double precision)
    ORDER BY g.finalized_at
    LIMIT $2)

-- name: cleanup_cancel_requests
-- Cancel requests whose job finished or is gone (at most $1): they did
-- their work, or came too late. A request for an unfinished job stays.
DELETE FROM job_cancel_requests WHERE job_id IN (
  SELECT q.job_id FROM job_cancel_requests AS q
   WHERE NOT EXISTS (SELECT 1 FROM jobs AS j
                      WHERE j.id = q.job_id
                        AND j.state NOT IN ('completed', 'cancelled'))
   LIMIT $1)

-- name: cleanup_dead_letters
-- Dead letter retention ([worker] dead_letter_retention): deletes up to $2
-- dead letters that failed more than $1 seconds ago, oldest first.
DELETE FROM dead_letter_jobs WHERE id IN (
  SELECT id FROM dead_letter_jobs
   WHERE failed_at < now() - make_interval(secs => $1::double precision)
   ORDER BY failed_at
   LIMIT $2)

-- name: cleanup_nodes
-- Rows of processes the rescue took back more than ten reclaim windows
-- ($1 s) ago, and that no batch names any more.
DELETE FROM worker_nodes AS n
 WHERE n.rescued_at < now() - make_interval(secs => $1::double precision)
   AND NOT EXISTS (SELECT 1 FROM job_batches AS b
                    WHERE b.worker = n.worker_id AND b.rescued_at IS NULL)

-- name: cleanup_starts
-- Start records (job_starts) no rescue can need any more (at most $1,
-- oldest first): their claim is gone or was rescued, or holds no running
-- job (a lane batch finished, a row batch without a running row).
DELETE FROM job_starts WHERE ctid IN (
  SELECT s.ctid FROM job_starts AS s
   WHERE NOT EXISTS (
           SELECT 1 FROM job_batches AS b
            WHERE b.id = s.batch_id AND b.rescued_at IS NULL
              AND CASE WHEN b.on_lane THEN b.finished_at IS NULL
                       ELSE EXISTS (SELECT 1 FROM jobs_in AS j
                                     WHERE j.batch_id = b.id
                                       AND j.state = 'running') END)
   ORDER BY s.at
   LIMIT $1)

-- name: dead_tuples
-- The small queue tables' dead tuples (statistics, updated within a second
-- or so): the ring's tables are emptied whole and need no vacuum here.
SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables
 WHERE schemaname = current_schema()
   AND relname IN ('worker_nodes', 'queue_controls',
                   'queue_starts', 'jobs_unique', 'job_starts', 'job_ring')
