-- Retention of the ring (the leader runs it each maintenance round; the
-- caller sets a short lock_timeout): empties, by TRUNCATE, the oldest slot
-- that stopped being current more than p_retention ago and was not emptied
-- since. TRUNCATE writes no WAL per row and leaves no dead tuple, even
-- while a transaction stays open somewhere. First the rows still needed
-- move to the slot -1 partitions (jobs_kept, job_batches_kept,
-- batch_receipts_kept), so nothing needed is lost whatever its age:
--   - jobs off the lanes that are unfinished or finished within the
--     retention;
--   - lane jobs not handed out yet, and those of lane batches that are
--     unfinished or finished within the retention;
--   - those batches, each lane's newest batch (its position), row batches
--     with running jobs, and the receipts of every batch kept.
-- Lane jobs kept by an earlier round that a dropped batch handed out are
-- deleted with it.
-- Returns what it did, or NULL when no slot was due.
CREATE OR REPLACE FUNCTION actor_worker_recycle(p_retention interval)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
DECLARE
  v_ring  job_ring;
  v_cur   integer := actor_worker_slot();
  v_start timestamptz;
  v_end   timestamptz;
  v_slot  integer;
  v_keep  bigint[];
  v_moved bigint := 0;
  v_n     bigint;
  v_empty boolean;
  l       record;
BEGIN
  SELECT * INTO v_ring FROM job_ring FOR UPDATE;
  v_start := to_timestamp(floor(extract(epoch FROM now())
                                / extract(epoch FROM v_ring.period))
                          * extract(epoch FROM v_ring.period));
  -- Slot cur + k was current 8 - k periods ago and ended 7 - k periods
  -- before the current one began.
  FOR k IN 1..6 LOOP
    v_end := v_start - (7 - k) * v_ring.period;
    IF v_end <= now() - p_retention
       AND coalesce(v_ring.recycled_at[(v_cur + k) % 8 + 1], '-infinity') < v_end THEN
      v_slot := (v_cur + k) % 8;
      EXIT;
    END IF;
  END LOOP;
  IF v_slot IS NULL THEN
    RETURN NULL;
  END IF;
  -- An empty slot (a new or quiet cluster) needs no lock: nothing writes
  -- to a slot that is not current, and an ACCESS EXCLUSIVE lock held by a
  -- leader that hangs mid-round would stop every claim.
  EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM jobs_slot_%s)'
                 ' AND NOT EXISTS (SELECT 1 FROM job_batches_slot_%s)'
                 ' AND NOT EXISTS (SELECT 1 FROM batch_receipts_slot_%s)',
                 v_slot, v_slot, v_slot) INTO v_empty;
  IF v_empty THEN
    UPDATE job_ring SET recycled_at[v_slot + 1] = now();
    RETURN NULL;
  END IF;
  EXECUTE format('LOCK TABLE jobs_slot_%s, job_batches_slot_%s, '
                 'batch_receipts_slot_%s IN ACCESS EXCLUSIVE MODE',
                 v_slot, v_slot, v_slot);

  -- Jobs off the lanes still unfinished or finished within the retention.
  EXECUTE format('UPDATE jobs SET slot = -1 WHERE slot = %s AND unique_key IS NULL'
                 ' AND ready_xid = ''0'' AND (state NOT IN (''completed'', ''cancelled'')'
                 ' OR finalized_at IS NULL OR finalized_at > now() - $1)', v_slot)
    USING p_retention;
  GET DIAGNOSTICS v_n = ROW_COUNT; v_moved := v_moved + v_n;
  -- Lane jobs not handed out: past their lane's position.
  FOR l IN SELECT k.queue, k.priority, p.tick_lo, p.tick_hi, p.to_xid, p.to_id
             FROM actor_worker_lanes() AS k
             LEFT JOIN LATERAL actor_worker_lane_position(k.queue, k.priority) AS p
               ON true LOOP
    EXECUTE format('UPDATE jobs AS j SET slot = -1 WHERE j.slot = %s'
                   ' AND j.unique_key IS NULL AND j.queue = $1 AND j.priority = $2'
                   ' AND j.ready_xid <> ''0'' AND ($3::pg_snapshot IS NULL'
                   '  OR j.ready_xid >= pg_snapshot_xmax($3)'
                   '  OR j.ready_xid = ANY (ARRAY(SELECT pg_snapshot_xip($3))))'
                   ' AND NOT actor_worker_handed_out(j.ready_xid, j.id, $3, $4, $5, $6)',
                   v_slot)
      USING l.queue, l.priority, l.tick_lo, l.tick_hi, l.to_xid, l.to_id;
    GET DIAGNOSTICS v_n = ROW_COUNT; v_moved := v_moved + v_n;
  END LOOP;
  -- Lane batches unfinished or finished within the retention, and their jobs.
  SELECT coalesce(array_agg(b.id), '{}') INTO v_keep
    FROM job_batches AS b
   WHERE b.on_lane AND b.rescued_at IS NULL
     AND coalesce(b.finished_at, 'infinity') > now() - p_retention;
  -- One range scan of the slot's lane index per batch (a join of the
  -- batches with the slot could compare every pair: hours, under the lock).
  EXECUTE format('UPDATE jobs AS j SET slot = -1 WHERE j.slot = %s AND j.id IN ('
                 ' SELECT x.id FROM job_batches AS b CROSS JOIN LATERAL ('
                 '  SELECT r.id FROM jobs_slot_%s AS r'
                 '   WHERE r.queue = b.queue AND r.priority = b.priority'
                 '     AND r.ready_xid <> ''0'' AND r.unique_key IS NULL'
                 '     AND (r.ready_xid, r.id) >= (b.first_xid, b.first_id)'
                 '     AND r.ready_xid <= b.to_xid'
                 '     AND (r.ready_xid, r.id) <= (b.to_xid, b.to_id)'
                 '     AND pg_visible_in_snapshot(r.ready_xid, b.tick_hi)'
                 '     AND NOT pg_visible_in_snapshot(r.ready_xid, b.tick_lo)) AS x'
                 ' WHERE b.id = ANY ($1))', v_slot, v_slot)
    USING v_keep;
  GET DIAGNOSTICS v_n = ROW_COUNT; v_moved := v_moved + v_n;
  -- The batches kept: those, each lane's newest, row batches with running
  -- jobs; then their receipts.
  v_keep := v_keep || ARRAY(
    SELECT p.id FROM (SELECT DISTINCT b.queue, b.priority FROM job_batches AS b
                       WHERE b.on_lane) AS k, LATERAL (
      SELECT b.id FROM job_batches AS b
       WHERE b.queue = k.queue AND b.priority = k.priority AND b.on_lane
       ORDER BY b.id DESC LIMIT 1) AS p)
    || ARRAY(SELECT DISTINCT j.batch_id FROM jobs AS j
              WHERE j.state = 'running' AND j.batch_id IS NOT NULL);
  EXECUTE format('UPDATE job_batches SET slot = -1 WHERE slot = %s AND id = ANY ($1)',
                 v_slot) USING v_keep;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  EXECUTE format('UPDATE batch_receipts SET slot = -1 WHERE slot = %s'
                 ' AND batch_id = ANY ($1)', v_slot) USING v_keep;
  -- Lane jobs an earlier round kept (jobs_kept) that a batch this slot
  -- drops now handed out: they finished past the retention (or before
  -- their batch was rescued), and without the batch nothing could tell
  -- (cleanup.sql leaves lane jobs to their batch).
  EXECUTE format('DELETE FROM jobs_kept AS j WHERE j.id IN ('
                 ' SELECT x.id FROM job_batches_slot_%s AS b CROSS JOIN LATERAL ('
                 '  SELECT r.id FROM jobs_kept AS r'
                 '   WHERE r.queue = b.queue AND r.priority = b.priority'
                 '     AND r.ready_xid <> ''0'''
                 '     AND (r.ready_xid, r.id) >= (b.first_xid, b.first_id)'
                 '     AND r.ready_xid <= b.to_xid'
                 '     AND (r.ready_xid, r.id) <= (b.to_xid, b.to_id)'
                 '     AND pg_visible_in_snapshot(r.ready_xid, b.tick_hi)'
                 '     AND NOT pg_visible_in_snapshot(r.ready_xid, b.tick_lo)) AS x'
                 ' WHERE b.on_lane)', v_slot);
  EXECUTE format('TRUNCATE jobs_slot_%s, job_batches_slot_%s, batch_receipts_slot_%s',
                 v_slot, v_slot, v_slot);
  UPDATE job_ring SET recycled_at[v_slot + 1] = now();
  RETURN format('emptied ring slot %s (kept %s jobs and %s batches)',
                v_slot, v_moved, v_n);
END
$$;
