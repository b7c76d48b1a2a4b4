-- 019_lane_partitions: finished lane jobs leave a partition at a time.
--
-- Until 018, retention deleted completed lane rows one by one: a WAL record
-- and a dead tuple per job, and a vacuum pass of the whole table every
-- minute under load (bench/results/2026-12-01-retention-cost.md). Here
-- job_rows becomes a partitioned table. The row-per-state jobs, and lane
-- rows enqueued before this migration, stay in one partition
-- (job_rows_main, the old table); lane rows go to "lane partitions"
-- (job_rows_lane_N), one generation at a time. The leader's maintenance
-- starts a new generation every so often (actor_worker_rotate_lanes) and
-- drops a whole lane partition once every job in it finished longer ago
-- than the retention (actor_worker_lane_partition_droppable): no per-row
-- WAL, no dead tuples, no vacuum.
--
-- Which partition a row lives in is a function of its columns:
-- job_rows_main holds every row off the lanes (ready_xid NULL) and every
-- lane row without a generation; lane_gen N routes a lane row to
-- job_rows_lane_N. A lane row that leaves its lane (a failure
-- materialized, a job set aside by the fence, a cancel) moves to
-- job_rows_main by itself. Claims, cursors, batches and the `jobs` view
-- work as before: partitions change where rows live, not what they mean.
--
-- Upgrading needs no stop: no row moves. The migration holds job_rows for
-- one scan of it (ATTACH checks that every row belongs in job_rows_main),
-- so claims and enqueues pause for about that long; workers of 018 keep
-- working against the new schema (their enqueues land in job_rows_main),
-- and lane rows enqueued before it are claimed first, then retention
-- deletes them row by row as before.

ALTER TABLE job_rows RENAME TO job_rows_main;
ALTER TABLE job_rows_main ADD COLUMN lane_gen integer;

-- The lane partition a lane row goes to; NULL: job_rows_main. Set by the
-- enqueue paths from lane_generations; internal, like ready_xid.
CREATE TABLE job_rows
  (LIKE job_rows_main INCLUDING DEFAULTS INCLUDING CONSTRAINTS
                      INCLUDING GENERATED)
  PARTITION BY LIST ((CASE WHEN ready_xid IS NULL THEN NULL ELSE lane_gen END));
ALTER TABLE job_rows ALTER COLUMN id SET DEFAULT nextval('jobs_id_seq');
-- (A partitioned table's unique index must hold the partition key, so ids
-- are unique because one sequence hands them out: job_rows_main keeps its
-- primary key, a lane partition has a plain index on id.)
ALTER TABLE job_rows ATTACH PARTITION job_rows_main FOR VALUES IN (NULL);

-- Statement triggers fire for the table a statement names: inserts through
-- job_rows (the view's rule, the enqueue paths) notify from here, direct
-- inserts into job_rows_main (unique jobs) from its own trigger.
CREATE TRIGGER jobs_notify_inserted
  AFTER INSERT ON job_rows
  REFERENCING NEW TABLE AS inserted_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION actor_worker_notify_inserted();

-- The lane generations that have a partition. New lane rows go to the
-- newest (max(gen)); started_at dates it for the rotation.
CREATE TABLE lane_generations (
  gen        integer     PRIMARY KEY,
  started_at timestamptz NOT NULL DEFAULT now()
);

-- Adds the next generation's partition and makes it current; returns its
-- number. The table is built apart and then attached: ATTACH takes SHARE
-- UPDATE EXCLUSIVE on job_rows, which no claim, enqueue or update waits for
-- (CREATE TABLE ... PARTITION OF would wait for every open transaction that
-- touched job_rows, and every new one would queue behind it).
CREATE FUNCTION actor_worker_add_lane_partition() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_gen integer;
  v_name text;
BEGIN
  -- One at a time (two leaders for a moment, a migration).
  PERFORM pg_advisory_xact_lock(hashtext('actor_worker_lane_partitions'));
  SELECT coalesce(max(gen), 0) + 1 INTO v_gen FROM lane_generations;
  v_name := 'job_rows_lane_' || v_gen;
  EXECUTE format('CREATE TABLE %I (LIKE job_rows INCLUDING DEFAULTS '
                 'INCLUDING CONSTRAINTS INCLUDING GENERATED)', v_name);
  -- Every row of a lane partition is a lane row, and a lane row's own
  -- state is 'available' (004: the rest is derived; a row whose state
  -- changes leaves its lane, and so the partition). Said as a constraint,
  -- it lets the planner leave lane partitions out of every query for rows
  -- off the lanes or in another state (the claim's row-per-state part and
  -- running count, retention of finished rows, admin lists by state).
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I '
                 'CHECK (ready_xid IS NOT NULL AND state = ''available'')',
                 v_name, v_name || '_lane_rows');
  -- The lane index needs no predicate, but keeps 004's so that the
  -- claim's queries match it.
  EXECUTE format('CREATE INDEX %I ON %I (queue, priority, ready_xid, id) '
                 'WHERE ready_xid IS NOT NULL', v_name || '_lane_idx', v_name);
  EXECUTE format('CREATE INDEX %I ON %I (id)', v_name || '_id_idx', v_name);
  EXECUTE format('ALTER TABLE job_rows ATTACH PARTITION %I FOR VALUES IN (%s)',
                 v_name, v_gen);
  INSERT INTO lane_generations (gen) VALUES (v_gen);
  RETURN v_gen;
END
$$;

SELECT actor_worker_add_lane_partition();

-- The view, and the functions that take or return job_rows's row type,
-- still point at the old table under its new name: create them again over
-- the partitioned table (bodies as in 004 and 006).
DROP VIEW jobs;
DROP FUNCTION actor_worker_batch_of(job_rows_main);
DROP FUNCTION actor_worker_batch_rows(claim_batches);
DROP FUNCTION actor_worker_row_json(job_rows_main);
DROP FUNCTION actor_worker_dead_letter(job_rows_main, text);

-- A job's row as the `jobs` view shows it (without the internal columns),
-- for events and follow-ups.
CREATE FUNCTION actor_worker_row_json(r job_rows) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT to_jsonb(r) - 'ready_xid' - 'args_bytes' - 'lane_gen'
$$;

CREATE FUNCTION actor_worker_dead_letter(p_job job_rows, p_message text)
RETURNS dead_letter_jobs
LANGUAGE sql VOLATILE AS $$
  INSERT INTO dead_letter_jobs
    (original_job_id, kind, queue, args, priority, attempt, max_attempts,
     error_count, last_error_message, created_at, failed_at, metadata, tags,
     callback_id)
  VALUES (p_job.id, p_job.kind, p_job.queue, p_job.args, p_job.priority,
          p_job.attempt, p_job.max_attempts, p_job.error_count + 1, p_message,
          p_job.created_at, now(), p_job.metadata, p_job.tags,
          p_job.callback_id)
  RETURNING *
$$;

CREATE FUNCTION actor_worker_batch_of(r job_rows)
RETURNS SETOF claim_batches LANGUAGE sql STABLE ROWS 1 AS $$
  SELECT b.* FROM (SELECT * FROM claim_batches AS x
                    WHERE x.queue = r.queue AND x.priority = r.priority
                      AND (x.hi_xid, x.hi_id) >= (r.ready_xid, r.id)
                    ORDER BY x.hi_xid, x.hi_id LIMIT 1) AS b
   WHERE r.ready_xid IS NOT NULL AND r.state = 'available'
     AND (b.lo_xid, b.lo_id) < (r.ready_xid, r.id)
$$;

-- The lane rows in batch b's range (lo, hi], in claim order. Written as
-- index ranges on (xid, id) with plain bounds: a btree scan bounded by row
-- comparisons on both ends positions on the lower one but cannot stop at
-- the upper one, and would walk the rest of the lane.
CREATE FUNCTION actor_worker_batch_rows(b claim_batches)
RETURNS SETOF job_rows LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF b.lo_xid = b.hi_xid THEN
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.lo_xid
       AND r.id > b.lo_id AND r.id <= b.hi_id
     ORDER BY r.ready_xid, r.id;
  ELSE
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.lo_xid
       AND r.id > b.lo_id
     ORDER BY r.ready_xid, r.id;
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL
       AND r.ready_xid > b.lo_xid AND r.ready_xid < b.hi_xid
     ORDER BY r.ready_xid, r.id;
    RETURN QUERY
    SELECT r.* FROM job_rows AS r
     WHERE r.queue = b.queue AND r.priority = b.priority
       AND r.ready_xid IS NOT NULL AND r.ready_xid = b.hi_xid
       AND r.id <= b.hi_id
     ORDER BY r.ready_xid, r.id;
  END IF;
END
$$;

-- The public view: every column of the old table, with state, attempt,

-- The public view, as in 004.
CREATE VIEW jobs AS
SELECT r.id, r.kind, r.queue, r.args,
       CASE WHEN b.id IS NULL THEN r.state
            WHEN c.finalized_at IS NOT NULL THEN 'completed'
            ELSE 'running' END AS state,
       r.priority, r.run_at, r.created_at,
       r.attempt + CASE WHEN b.id IS NULL THEN 0 ELSE 1 END AS attempt,
       r.error_count, r.max_attempts, r.last_error_message, r.last_failed_at,
       CASE WHEN b.id IS NULL THEN r.locked_by ELSE b.worker END AS locked_by,
       CASE WHEN b.id IS NULL THEN r.locked_at ELSE b.heartbeat_at END AS locked_at,
       CASE WHEN b.id IS NULL THEN r.finalized_at ELSE c.finalized_at END AS finalized_at,
       r.metadata, r.tags, r.deadline_ms, r.deadline_at, r.callback_id,
       r.callback_timeout_at, r.callback_result, r.ordering_key, r.unique_key,
       r.unique_states
  FROM job_rows AS r
  LEFT JOIN LATERAL actor_worker_batch_of(r) AS b ON true
  LEFT JOIN LATERAL (
    SELECT min(bc.finalized_at) AS finalized_at FROM batch_completions AS bc
     WHERE b.id IS NOT NULL AND bc.batch_id = b.id AND r.id = ANY (bc.ids)
  ) AS c ON true;


ALTER VIEW jobs ALTER COLUMN id SET DEFAULT nextval('jobs_id_seq');
ALTER VIEW jobs ALTER COLUMN queue SET DEFAULT 'default';
ALTER VIEW jobs ALTER COLUMN args SET DEFAULT '{}';
ALTER VIEW jobs ALTER COLUMN state SET DEFAULT 'available';
ALTER VIEW jobs ALTER COLUMN priority SET DEFAULT 0;
ALTER VIEW jobs ALTER COLUMN run_at SET DEFAULT now();
ALTER VIEW jobs ALTER COLUMN created_at SET DEFAULT now();
ALTER VIEW jobs ALTER COLUMN attempt SET DEFAULT 0;
ALTER VIEW jobs ALTER COLUMN error_count SET DEFAULT 0;
ALTER VIEW jobs ALTER COLUMN metadata SET DEFAULT '{}';
ALTER VIEW jobs ALTER COLUMN tags SET DEFAULT '{}';

-- A job goes on a lane when it is due at once (run_at left at its default
-- now()), 'available', and has neither ordering nor unique key; anything
-- else takes the row-per-state path. Rules rewrite whole statements, so a
-- bulk INSERT ... SELECT stays one set-based insert (one NOTIFY).
CREATE RULE jobs_insert AS ON INSERT TO jobs DO INSTEAD
INSERT INTO job_rows (id, kind, queue, args, state, priority, run_at,
                      created_at, attempt, error_count, max_attempts,
                      last_error_message, last_failed_at, locked_by, locked_at,
                      finalized_at, metadata, tags, deadline_ms, deadline_at,
                      callback_id, callback_timeout_at, callback_result,
                      ordering_key, unique_key, unique_states, ready_xid,
                      lane_gen)
VALUES (NEW.id, NEW.kind, NEW.queue, NEW.args, NEW.state, NEW.priority,
        NEW.run_at, NEW.created_at, NEW.attempt, NEW.error_count,
        NEW.max_attempts, NEW.last_error_message, NEW.last_failed_at,
        NEW.locked_by, NEW.locked_at, NEW.finalized_at, NEW.metadata, NEW.tags,
        NEW.deadline_ms, NEW.deadline_at, NEW.callback_id,
        NEW.callback_timeout_at, NEW.callback_result, NEW.ordering_key,
        NEW.unique_key, NEW.unique_states,
        CASE WHEN NEW.state = 'available' AND NEW.run_at = now()
                  AND NEW.ordering_key IS NULL AND NEW.unique_key IS NULL
             THEN pg_current_xact_id() END,
        (SELECT max(g.gen) FROM lane_generations AS g))
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

-- An UPDATE writes the derived columns only when it changes them. A lane
-- job that can no longer run as it is (another state, a later run_at, an
-- ordering or unique key) leaves its lane; one moved to another queue or
-- priority gets a fresh lane key.
CREATE RULE jobs_update AS ON UPDATE TO jobs DO INSTEAD
UPDATE job_rows SET
  id = NEW.id, kind = NEW.kind, queue = NEW.queue, args = NEW.args,
  state = CASE WHEN NEW.state IS DISTINCT FROM OLD.state
               THEN NEW.state ELSE job_rows.state END,
  priority = NEW.priority, run_at = NEW.run_at, created_at = NEW.created_at,
  attempt = CASE WHEN NEW.attempt IS DISTINCT FROM OLD.attempt
                 THEN NEW.attempt ELSE job_rows.attempt END,
  error_count = NEW.error_count, max_attempts = NEW.max_attempts,
  last_error_message = NEW.last_error_message,
  last_failed_at = NEW.last_failed_at,
  locked_by = CASE WHEN NEW.locked_by IS DISTINCT FROM OLD.locked_by
                   THEN NEW.locked_by ELSE job_rows.locked_by END,
  locked_at = CASE WHEN NEW.locked_at IS DISTINCT FROM OLD.locked_at
                   THEN NEW.locked_at ELSE job_rows.locked_at END,
  finalized_at = CASE WHEN NEW.finalized_at IS DISTINCT FROM OLD.finalized_at
                      THEN NEW.finalized_at ELSE job_rows.finalized_at END,
  metadata = NEW.metadata, tags = NEW.tags, deadline_ms = NEW.deadline_ms,
  deadline_at = NEW.deadline_at, callback_id = NEW.callback_id,
  callback_timeout_at = NEW.callback_timeout_at,
  callback_result = NEW.callback_result, ordering_key = NEW.ordering_key,
  unique_key = NEW.unique_key, unique_states = NEW.unique_states,
  ready_xid = CASE WHEN job_rows.ready_xid IS NULL THEN NULL
                   WHEN (NEW.state IS DISTINCT FROM OLD.state
                         AND NEW.state <> 'available')
                        OR NEW.run_at > now()
                        OR NEW.ordering_key IS NOT NULL
                        OR NEW.unique_key IS NOT NULL THEN NULL
                   WHEN NEW.queue IS DISTINCT FROM OLD.queue
                        OR NEW.priority IS DISTINCT FROM OLD.priority
                   THEN pg_current_xact_id()
                   ELSE job_rows.ready_xid END
 WHERE job_rows.id = OLD.id
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

CREATE RULE jobs_delete AS ON DELETE TO jobs DO INSTEAD
DELETE FROM job_rows WHERE job_rows.id = OLD.id
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

-- Starts the next lane generation once the current one is older than
-- p_interval_seconds; returns its number, or NULL. A current partition
-- still empty (an idle system) is kept until a job arrives in it: an idle
-- database gathers no empty partitions. (Its started_at stays: the
-- generation before it may go a retention after that.)
CREATE FUNCTION actor_worker_rotate_lanes(p_interval_seconds double precision)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_cur lane_generations;
  v_empty boolean;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('actor_worker_lane_partitions'));
  SELECT * INTO v_cur FROM lane_generations ORDER BY gen DESC LIMIT 1;
  IF FOUND AND v_cur.started_at > now() - make_interval(secs => p_interval_seconds) THEN
    RETURN NULL;
  END IF;
  IF FOUND THEN
    EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %I)',
                   'job_rows_lane_' || v_cur.gen) INTO v_empty;
    IF v_empty THEN
      RETURN NULL;
    END IF;
  END IF;
  RETURN actor_worker_add_lane_partition();
END
$$;

-- The oldest lane partition, if it may go now: not the current
-- generation; the next one started more than the retention ago (no row of
-- this one can have finished later than that, give or take an enqueue in
-- flight at the switch, which the checks below catch); and for every lane
-- with rows in it, the lane's cursor is past its last row there and every
-- batch that took its rows closed more than the retention ago. Every row
-- of it has then completed: a job that failed, was released or cancelled
-- left it (its row moved to job_rows_main, or took a new lane key past the
-- cursor).
CREATE FUNCTION actor_worker_lane_partition_droppable(
  p_retention_seconds double precision)
RETURNS TABLE (gen integer, name text)
LANGUAGE plpgsql AS $$
DECLARE
  v_gen integer;
  v_name text;
  v_cutoff timestamptz := now() - make_interval(secs => p_retention_seconds);
  l record;
  v_queues text[] := '{}';
  v_prios integer[] := '{}';
  v_last_xids xid8[] := '{}';
  v_last_ids bigint[] := '{}';
  v_moved bigint;
BEGIN
  SELECT g.gen INTO v_gen FROM lane_generations AS g
   WHERE g.gen < (SELECT max(x.gen) FROM lane_generations AS x)
     AND EXISTS (SELECT 1 FROM pg_inherits AS i
                  WHERE i.inhrelid = to_regclass('job_rows_lane_' || g.gen)
                    AND i.inhparent = 'job_rows'::regclass
                    AND NOT i.inhdetachpending)
   ORDER BY g.gen LIMIT 1;
  IF v_gen IS NULL OR (SELECT x.started_at FROM lane_generations AS x
                        WHERE x.gen > v_gen ORDER BY x.gen LIMIT 1) > v_cutoff
  THEN
    RETURN;
  END IF;
  v_name := 'job_rows_lane_' || v_gen;
  -- Each lane with rows in it (a skip scan of its lane index), with its
  -- last key there.
  FOR l IN EXECUTE format($q$
    WITH RECURSIVE lanes(queue, priority) AS (
      (SELECT r.queue, r.priority FROM %1$I AS r
        WHERE r.ready_xid IS NOT NULL
        ORDER BY r.queue, r.priority LIMIT 1)
      UNION ALL
      SELECT n.queue, n.priority FROM lanes, LATERAL (
        SELECT r.queue, r.priority FROM %1$I AS r
         WHERE r.ready_xid IS NOT NULL
           AND (r.queue, r.priority) > (lanes.queue, lanes.priority)
         ORDER BY r.queue, r.priority LIMIT 1) AS n
    )
    SELECT lanes.queue, lanes.priority, k.ready_xid AS last_xid,
           k.id AS last_id
      FROM lanes, LATERAL (
        SELECT r.ready_xid, r.id FROM %1$I AS r
         WHERE r.queue = lanes.queue AND r.priority = lanes.priority
           AND r.ready_xid IS NOT NULL
         ORDER BY r.ready_xid DESC, r.id DESC LIMIT 1) AS k
    $q$, v_name)
  LOOP
    IF NOT EXISTS (SELECT 1 FROM claim_cursors AS c
                    WHERE c.queue = l.queue AND c.priority = l.priority
                      AND (c.last_xid, c.last_id) >= (l.last_xid, l.last_id))
    THEN
      RETURN;
    END IF;
    -- Open batches are few (their own index); closed ones up to the last
    -- key are read once the time check above has passed.
    IF EXISTS (SELECT 1 FROM claim_batches AS b
                WHERE b.closed_at IS NULL
                  AND b.queue = l.queue AND b.priority = l.priority
                  AND (b.lo_xid, b.lo_id) < (l.last_xid, l.last_id))
       OR EXISTS (SELECT 1 FROM claim_batches AS b
                   WHERE b.queue = l.queue AND b.priority = l.priority
                     AND (b.hi_xid, b.hi_id) < (l.last_xid, l.last_id)
                     AND b.closed_at >= v_cutoff)
       OR EXISTS (SELECT 1 FROM (SELECT * FROM claim_batches AS x
                                  WHERE x.queue = l.queue
                                    AND x.priority = l.priority
                                    AND (x.hi_xid, x.hi_id)
                                        >= (l.last_xid, l.last_id)
                                  ORDER BY x.hi_xid, x.hi_id LIMIT 1) AS b
                   WHERE (b.lo_xid, b.lo_id) < (l.last_xid, l.last_id)
                     AND (b.closed_at IS NULL OR b.closed_at >= v_cutoff))
    THEN
      RETURN;
    END IF;
    v_queues := v_queues || l.queue;
    v_prios := v_prios || l.priority;
    v_last_xids := v_last_xids || l.last_xid;
    v_last_ids := v_last_ids || l.last_id;
  END LOOP;
  -- A safety net, as retention's in 018: every row left in it is listed as
  -- completed by its batch. Should one not be, it moves to the current
  -- generation with a fresh lane key (it runs again) rather than go with
  -- the partition; the partition goes in a later round.
  EXECUTE format($q$
    WITH done AS MATERIALIZED (
      SELECT x AS id
        FROM unnest($1, $2, $3, $4) AS k(queue, priority, last_xid, last_id)
        JOIN claim_batches AS b
          ON b.queue = k.queue AND b.priority = k.priority
         AND (b.lo_xid, b.lo_id) < (k.last_xid, k.last_id)
        JOIN batch_completions AS c ON c.batch_id = b.id,
             unnest(c.ids) AS x
    )
    UPDATE job_rows AS r
       SET ready_xid = pg_current_xact_id(),
           lane_gen = (SELECT max(g.gen) FROM lane_generations AS g)
     WHERE r.id IN (SELECT p.id FROM %I AS p
                     WHERE NOT EXISTS (SELECT 1 FROM done
                                        WHERE done.id = p.id))
       AND r.ready_xid IS NOT NULL AND r.state = 'available'
    $q$, v_name)
    USING v_queues, v_prios, v_last_xids, v_last_ids;
  GET DIAGNOSTICS v_moved = ROW_COUNT;
  IF v_moved > 0 THEN
    RAISE WARNING 'actor-worker: % unfinished job(s) of lane partition % put back',
      v_moved, v_name;
    RETURN;
  END IF;
  RETURN QUERY SELECT v_gen, v_name;
END
$$;

-- What the leader's maintenance has to do about lane partitions, in
-- order: 'finalize' a detach that was interrupted, 'drop' a partition
-- detached but not dropped (the process died in between), 'detach' (and
-- then drop) the partition that may go now. Forgets generations whose
-- table is gone. The runtime runs each outside a transaction block
-- (DETACH ... CONCURRENTLY cannot run in one) and then
-- actor_worker_lane_partition_gone.
CREATE FUNCTION actor_worker_lane_partition_chores(
  p_retention_seconds double precision)
RETURNS TABLE (gen integer, name text, action text)
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM lane_generations AS g
   WHERE to_regclass('job_rows_lane_' || g.gen) IS NULL
     AND g.gen < (SELECT max(x.gen) FROM lane_generations AS x);
  RETURN QUERY
  SELECT g.gen, 'job_rows_lane_' || g.gen,
         CASE WHEN i.inhrelid IS NULL THEN 'drop' ELSE 'finalize' END
    FROM lane_generations AS g
    LEFT JOIN pg_inherits AS i
      ON i.inhrelid = to_regclass('job_rows_lane_' || g.gen)
     AND i.inhparent = 'job_rows'::regclass
   WHERE to_regclass('job_rows_lane_' || g.gen) IS NOT NULL
     AND (i.inhrelid IS NULL OR i.inhdetachpending)
   ORDER BY g.gen;
  RETURN QUERY
  SELECT d.gen, d.name, 'detach'
    FROM actor_worker_lane_partition_droppable(p_retention_seconds) AS d;
END
$$;

-- Retention of lane rows. Those in job_rows_main (enqueued before 019, or
-- without a generation) are deleted row by row as in 018; a lane
-- partition goes whole (above). A batch's record goes once no row of its
-- range is left in a lane partition: below the oldest lane-partition row
-- of its lane (the "floor"). Until then it says which of those rows
-- completed.
CREATE OR REPLACE FUNCTION actor_worker_cleanup_lanes(
  p_retention_seconds double precision, p_max_jobs integer)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  l claim_cursors;
  b claim_batches;
  v_floor_xid xid8;
  v_floor_id bigint;
  v_done bigint[];
  v_deleted bigint := 0;
  v_batches bigint := 0;
  v_n bigint;
  v_cutoff timestamptz := now() - make_interval(secs => p_retention_seconds);
BEGIN
  FOR l IN SELECT * FROM claim_cursors ORDER BY queue, priority LOOP
    -- Bounded by jobs (and batches with no job left): batches are as small
    -- as one job when enqueues trickle in, and retention must keep up with
    -- completions.
    EXIT WHEN v_deleted + v_batches >= p_max_jobs;
    SELECT f.ready_xid, f.id INTO v_floor_xid, v_floor_id
      FROM job_rows AS f
     WHERE f.queue = l.queue AND f.priority = l.priority
       AND f.ready_xid IS NOT NULL
       AND (CASE WHEN f.ready_xid IS NULL THEN NULL ELSE f.lane_gen END)
           IS NOT NULL
     ORDER BY f.ready_xid, f.id LIMIT 1;
    FOR b IN
      SELECT * FROM claim_batches AS x
       WHERE x.queue = l.queue AND x.priority = l.priority
         AND (x.hi_xid, x.hi_id) < (coalesce(v_floor_xid, '18446744073709551615'),
                                    coalesce(v_floor_id, 0))
         AND x.closed_at < v_cutoff
       ORDER BY x.hi_xid, x.hi_id
       LIMIT p_max_jobs - v_deleted - v_batches
         FOR UPDATE SKIP LOCKED
    LOOP
      EXIT WHEN v_deleted + v_batches >= p_max_jobs;
      SELECT coalesce(array_agg(x), '{}') INTO v_done
        FROM batch_completions AS c, unnest(c.ids) AS x
       WHERE c.batch_id = b.id;
      -- By primary key, from the receipts; the range check is a guard.
      DELETE FROM job_rows_main AS r
       WHERE r.id = ANY (v_done)
         AND r.queue = b.queue AND r.priority = b.priority
         AND r.ready_xid IS NOT NULL AND r.state = 'available'
         AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
         AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
      GET DIAGNOSTICS v_n = ROW_COUNT;
      v_deleted := v_deleted + v_n;
      -- A batch whose rows went with their partition counts as one.
      IF v_n = 0 THEN
        v_batches := v_batches + 1;
      END IF;
      -- A safety net: a closed batch has no unfinished job on its lane. If
      -- one were left, deleting the batch would leave it behind the cursor,
      -- never claimed; put it back on its lane instead (it runs again).
      IF v_n < b.size THEN
        UPDATE job_rows AS r SET ready_xid = pg_current_xact_id()
         WHERE r.id IN (SELECT x.id FROM actor_worker_batch_rows(b) AS x
                         WHERE x.state = 'available'
                           AND x.id NOT IN (SELECT unnest(v_done)))
           AND r.ready_xid IS NOT NULL AND r.state = 'available';
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n > 0 THEN
          RAISE WARNING 'actor-worker: % job(s) of closed batch % put back', v_n, b.id;
        END IF;
      END IF;
      DELETE FROM batch_completions WHERE batch_id = b.id;
      DELETE FROM claim_batches WHERE id = b.id;
    END LOOP;
  END LOOP;
  RETURN v_deleted;
END
$$;

-- Outcomes and releases lock their batches in batch id order (bodies as in
-- 018 otherwise). A worker's storage connections may finish jobs of the
-- same batches at once; GROUP BY alone hands the batches over in hash
-- order once the plan is generic (below), and two connections locking two
-- batches in opposite orders deadlocked in the soak (one recorded its
-- outcomes one by one after it, nothing lost).
CREATE OR REPLACE FUNCTION actor_worker_finish_lane(
  p_worker text, p_jobs bigint[], p_batches bigint[], p_done boolean[],
  p_delete boolean, p_in_doubt boolean DEFAULT false)
RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_batch  bigint;
  v_done   bigint[];
  v_failed bigint[];
  v_rows   bigint;
  v_count  bigint;
  b        claim_batches;
BEGIN
  FOR v_batch, v_done, v_failed IN
    SELECT o.b, array_agg(o.j) FILTER (WHERE o.done),
           array_agg(o.j) FILTER (WHERE NOT o.done)
      FROM unnest(p_jobs, p_batches, p_done) AS o(j, b, done)
     GROUP BY o.b
     ORDER BY o.b
  LOOP
    SELECT * INTO b FROM claim_batches AS cb
     WHERE cb.id = v_batch AND cb.worker = p_worker AND cb.closed_at IS NULL
       FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    v_count := 0;
    IF v_done IS NOT NULL THEN
      IF p_delete THEN
        DELETE FROM job_rows AS r
         WHERE r.id = ANY (v_done) AND r.ready_xid IS NOT NULL
           AND r.state = 'available';
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_count := v_count + v_rows;
      ELSE
        IF p_in_doubt THEN
          SELECT array_agg(d) INTO v_done FROM unnest(v_done) AS d
           WHERE NOT EXISTS (SELECT 1 FROM batch_completions AS c
                              WHERE c.batch_id = v_batch AND d = ANY (c.ids));
        END IF;
        IF v_done IS NOT NULL THEN
          INSERT INTO batch_completions (batch_id, ids)
          VALUES (v_batch, v_done);
          v_count := v_count + cardinality(v_done);
        END IF;
      END IF;
    END IF;
    IF v_failed IS NOT NULL THEN
      UPDATE job_rows AS r
         SET state = 'running', attempt = r.attempt + 1, locked_by = p_worker,
             locked_at = now(), ready_xid = NULL
       WHERE r.id = ANY (v_failed)
         AND r.ready_xid IS NOT NULL AND r.state = 'available'
         AND r.queue = b.queue AND r.priority = b.priority
         AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
         AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
      GET DIAGNOSTICS v_rows = ROW_COUNT;
      v_count := v_count + v_rows;
    END IF;
    IF v_count > 0 THEN
      UPDATE claim_batches AS cb
         SET remaining = cb.remaining - v_count,
             closed_at = CASE WHEN cb.remaining - v_count <= 0 THEN now() END
       WHERE cb.id = v_batch;
    END IF;
    RETURN NEXT v_batch;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION actor_worker_release_lane(
  p_worker text, p_jobs bigint[], p_batches bigint[], p_started boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_batch    bigint;
  v_n        integer;
  v_ids      bigint[];
  v_count    bigint;
  v_released bigint := 0;
  b          claim_batches;
BEGIN
  FOR v_batch, v_n, v_ids IN
    SELECT o.b, count(*)::integer, array_agg(o.j)
      FROM unnest(p_jobs, p_batches) AS o(j, b)
     GROUP BY o.b
     ORDER BY o.b
  LOOP
    SELECT * INTO b FROM claim_batches AS cb
     WHERE cb.id = v_batch AND cb.worker = p_worker AND cb.closed_at IS NULL
       FOR UPDATE;
    CONTINUE WHEN NOT FOUND;
    UPDATE job_rows AS r
       SET ready_xid = pg_current_xact_id(),
           attempt = r.attempt + CASE WHEN p_started THEN 1 ELSE 0 END
     WHERE r.id = ANY (v_ids)
       AND r.ready_xid IS NOT NULL AND r.state = 'available'
       AND r.queue = b.queue AND r.priority = b.priority
       AND (r.ready_xid > b.lo_xid OR (r.ready_xid = b.lo_xid AND r.id > b.lo_id))
       AND (r.ready_xid < b.hi_xid OR (r.ready_xid = b.hi_xid AND r.id <= b.hi_id));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
      -- Counted by what moved: a batch closes only when nothing is left.
      UPDATE claim_batches AS cb
         SET remaining = cb.remaining - v_count,
             closed_at = CASE WHEN cb.remaining - v_count <= 0 THEN now() END
       WHERE cb.id = v_batch;
      PERFORM pg_notify('actor_worker_jobs', b.queue);
    END IF;
    v_released := v_released + v_count;
  END LOOP;
  RETURN v_released;
END
$$;

-- The runtime's functions on the hot path plan their statements once per
-- session (generic plans), and never compile them (JIT). With job_rows
-- partitioned, a custom plan costs milliseconds to make, and its estimate
-- for a lane scan past the cursor is about one row when the rows past it
-- share one enqueue transaction: the planner then appends the partitions
-- and sorts everything past the cursor instead of merging them in index
-- order (50 ms instead of 2.5 ms for a claim of 2,000 from a 200,000-job
-- backlog, measured). Generic plans estimate from the parameters' types
-- and keep the merge. A later migration that replaces one of these
-- functions must set the same again.
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN
    SELECT p.oid::regprocedure FROM pg_proc AS p
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proname IN ('actor_worker_claim', 'actor_worker_claim_unlimited',
                         'actor_worker_finish_and_claim',
                         'actor_worker_finish_lane', 'actor_worker_batch_jobs',
                         'actor_worker_batch_rows', 'actor_worker_release_lane',
                         'actor_worker_expire_batches',
                         'actor_worker_cleanup_lanes')
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan',
                   f);
    EXECUTE format('ALTER FUNCTION %s SET jit = off', f);
  END LOOP;
END
$$;
