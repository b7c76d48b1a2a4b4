-- 021_lane_generation_start: a lane generation starts only once every
-- new transaction's backend knows its partition.
--
-- Until 021 a rotation attached the new partition and made its generation
-- current in one transaction, and every enqueue took max(gen) under its
-- statement's snapshot. A backend takes in a new partition of job_rows
-- only when it next acquires a lock (its relation cache is refreshed
-- then), but a statement locks its tables before it takes its snapshot:
-- one whose locks came just before the rotation committed and whose
-- snapshot came just after saw the new generation and routed its row with
-- a partition list that lacked it ("no partition of relation job_rows
-- found for row", bench/results/2026-12-02-soak-packs.txt; the enqueue
-- failed and rolled back).
--
-- Now a rotation is two steps in two transactions. The first adds the
-- partition as *pending* (started_at NULL); no row goes there yet. A later
-- transaction *starts* it: started_at = clock_timestamp(), taken after the
-- attach committed. Every path that chooses a generation takes the newest
-- started at or before its own transaction's start (now()). A transaction
-- that started after that moment began after the attach committed, and a
-- backend takes in every committed catalog change when a transaction
-- starts: its partition list has the partition. One that started before
-- keeps using the generation before, whose partition it knows (it stays
-- until the next one started longer ago than the retention).
--
-- The runtime's maintenance calls actor_worker_rotate_lanes twice per
-- round, so a due rotation still completes in one round. Workers of 020
-- keep working against this schema: their enqueues may route to a pending
-- partition (with the race of before), whose rows are claimed and retained
-- like any other.

ALTER TABLE lane_generations
  ALTER COLUMN started_at DROP NOT NULL,
  ALTER COLUMN started_at DROP DEFAULT,
  -- The transaction that added it: the one that may not start it.
  ADD COLUMN added_xid xid8;

-- Adds the next generation's partition, pending; returns its number.
-- (Body as in 019 but for the last INSERT.)
CREATE OR REPLACE FUNCTION actor_worker_add_lane_partition() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_gen integer;
  v_name text;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('actor_worker_lane_partitions'));
  SELECT coalesce(max(gen), 0) + 1 INTO v_gen FROM lane_generations;
  v_name := 'job_rows_lane_' || v_gen;
  EXECUTE format('CREATE TABLE %I (LIKE job_rows INCLUDING DEFAULTS '
                 'INCLUDING CONSTRAINTS INCLUDING GENERATED)', v_name);
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I '
                 'CHECK (ready_xid IS NOT NULL AND state = ''available'')',
                 v_name, v_name || '_lane_rows');
  EXECUTE format('CREATE INDEX %I ON %I (queue, priority, ready_xid, id) '
                 'WHERE ready_xid IS NOT NULL', v_name || '_lane_idx', v_name);
  EXECUTE format('CREATE INDEX %I ON %I (id)', v_name || '_id_idx', v_name);
  EXECUTE format('ALTER TABLE job_rows ATTACH PARTITION %I FOR VALUES IN (%s)',
                 v_name, v_gen);
  INSERT INTO lane_generations (gen, started_at, added_xid)
  VALUES (v_gen, NULL, pg_current_xact_id());
  RETURN v_gen;
END
$$;

-- One step of the rotation; returns the generation it started, or NULL.
-- A pending generation added by an earlier transaction is started (its
-- partition is committed). Otherwise, once the current generation is
-- older than p_interval_seconds and not empty (019: an idle database
-- gathers no empty partitions), the next one is added, pending: the next
-- call starts it.
CREATE OR REPLACE FUNCTION actor_worker_rotate_lanes(
  p_interval_seconds double precision)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_pending lane_generations;
  v_cur lane_generations;
  v_empty boolean;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('actor_worker_lane_partitions'));
  SELECT * INTO v_pending FROM lane_generations
   WHERE started_at IS NULL ORDER BY gen LIMIT 1;
  IF FOUND THEN
    IF v_pending.added_xid IS NOT DISTINCT FROM pg_current_xact_id_if_assigned()
    THEN
      RETURN NULL; -- added by this transaction: not committed yet
    END IF;
    UPDATE lane_generations SET started_at = clock_timestamp()
     WHERE gen = v_pending.gen;
    RETURN v_pending.gen;
  END IF;
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
  PERFORM actor_worker_add_lane_partition();
  RETURN NULL;
END
$$;

-- The `jobs` view's INSERT rule (019), choosing the newest started
-- generation.
CREATE OR REPLACE RULE jobs_insert AS ON INSERT TO jobs DO INSTEAD
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
        (SELECT max(g.gen) FROM lane_generations AS g
          WHERE g.started_at <= now()))
RETURNING job_rows.id, job_rows.kind, job_rows.queue, job_rows.args,
          job_rows.state, job_rows.priority, job_rows.run_at,
          job_rows.created_at, job_rows.attempt, job_rows.error_count,
          job_rows.max_attempts, job_rows.last_error_message,
          job_rows.last_failed_at, job_rows.locked_by, job_rows.locked_at,
          job_rows.finalized_at, job_rows.metadata, job_rows.tags,
          job_rows.deadline_ms, job_rows.deadline_at, job_rows.callback_id,
          job_rows.callback_timeout_at, job_rows.callback_result,
          job_rows.ordering_key, job_rows.unique_key, job_rows.unique_states;

-- Retention's choice of a lane partition to drop (019): only a started
-- generation counts as current, and the next one's start is that of the
-- next started one. Its safety net moves rows to the newest started one.
CREATE OR REPLACE FUNCTION actor_worker_lane_partition_droppable(
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
   WHERE g.gen < (SELECT max(x.gen) FROM lane_generations AS x
                   WHERE x.started_at IS NOT NULL) -- (021)
     AND EXISTS (SELECT 1 FROM pg_inherits AS i
                  WHERE i.inhrelid = to_regclass('job_rows_lane_' || g.gen)
                    AND i.inhparent = 'job_rows'::regclass
                    AND NOT i.inhdetachpending)
   ORDER BY g.gen LIMIT 1;
  -- (021) The next generation that started: a pending one has not.
  IF v_gen IS NULL OR coalesce((SELECT x.started_at FROM lane_generations AS x
                                 WHERE x.gen > v_gen AND x.started_at IS NOT NULL
                                 ORDER BY x.gen LIMIT 1), 'infinity') > v_cutoff
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
           lane_gen = (SELECT max(g.gen) FROM lane_generations AS g
                        WHERE g.started_at <= now())
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


-- Unpacking (020) gives the job a row in the newest started generation.
CREATE OR REPLACE FUNCTION actor_worker_unpack(p_ids bigint[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  p job_packs;
  v_ids bigint[];
  v_count integer := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM unnest(p_ids) AS i WHERE actor_worker_packed(i)) THEN
    RETURN 0;
  END IF;
  FOR p IN
    SELECT * FROM job_packs AS x
     WHERE x.first_id IN (SELECT DISTINCT i - i % 1024 FROM unnest(p_ids) AS i
                           WHERE actor_worker_packed(i))
     ORDER BY x.first_id
       FOR UPDATE
  LOOP
    SELECT array_agg(r.id) INTO v_ids FROM actor_worker_pack_rows(p) AS r
     WHERE r.id = ANY (p_ids);
    CONTINUE WHEN v_ids IS NULL;
    INSERT INTO job_rows (id, kind, queue, args, state, priority, run_at,
                          created_at, ready_xid, lane_gen)
    SELECT r.id, r.kind, r.queue, r.args, 'available', r.priority, r.run_at,
           r.created_at, r.ready_xid,
           (SELECT max(g.gen) FROM lane_generations AS g
             WHERE g.started_at <= now())
      FROM actor_worker_pack_rows(p) AS r
     WHERE r.id = ANY (v_ids);
    UPDATE job_packs AS x SET unpacked = x.unpacked || v_ids
     WHERE x.first_id = p.first_id;
    v_count := v_count + cardinality(v_ids);
  END LOOP;
  RETURN v_count;
END
$$;

-- CREATE OR REPLACE dropped the settings 020 gave it.
ALTER FUNCTION actor_worker_unpack(bigint[])
  SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION actor_worker_unpack(bigint[]) SET jit = off;
