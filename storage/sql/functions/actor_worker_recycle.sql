-- Retention of the ring (the leader runs it each maintenance round; the
-- caller sets a short lock_timeout): empties, by TRUNCATE, the oldest slot
-- that stopped being current more than p_retention ago and was not emptied
-- since. TRUNCATE writes no WAL per row and leaves no dead tuple, even
-- while a transaction stays open somewhere. First the rows the slot still
-- needs are carried into the current slot, where the ring judges them
-- again when that slot's turn comes, so nothing is ever deleted row by row
-- (a deleted row stays, dead, in every index scan while a transaction is
-- open):
--   - jobs off the lanes that are unfinished or finished within the
--     retention;
--   - lane jobs not handed out yet, and those of lane batches that are
--     unfinished or finished (or taken back by a rescue) within the
--     retention;
--   - those batches, each lane's newest batch (its position), row batches
--     with running jobs, and the receipts of every batch kept.
-- The slot's tables are held ACCESS EXCLUSIVE from the first carried row
-- to the commit, which stops every claim: so a round carries at most
-- p_max_carried jobs and commits; the slot is emptied by the round that
-- finds fewer (a backlog in an old slot is carried over several rounds,
-- each stopping the claims for a moment, and the claims shrink it
-- meanwhile).
-- Returns what it did, or NULL when no slot was due.
CREATE OR REPLACE FUNCTION actor_worker_recycle(p_retention interval,
                                                p_max_carried integer)
RETURNS text
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
  v_ring  job_ring;
  v_cur   integer := actor_worker_slot();
  v_start timestamptz;
  v_end   timestamptz;
  v_slot  integer;
  v_keep  bigint[];
  v_left  bigint := p_max_carried;  -- jobs this round may still carry
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

  -- Jobs off the lanes still unfinished or finished within the retention,
  -- each state by its own index.
  EXECUTE format('UPDATE jobs_in SET slot = $3 WHERE slot = %s AND id IN ('
                 ' SELECT j.id FROM jobs_slot_%s AS j WHERE j.ready_xid = ''0'''
                 '    AND j.state IN (''available'', ''scheduled'')'
                 ' UNION ALL SELECT j.id FROM jobs_slot_%s AS j WHERE j.state = ''running'''
                 ' UNION ALL SELECT j.id FROM jobs_slot_%s AS j'
                 '  WHERE j.state = ''waiting_external'''
                 ' UNION ALL SELECT j.id FROM jobs_slot_%s AS j WHERE j.ready_xid = ''0'''
                 '    AND j.state IN (''completed'', ''cancelled'')'
                 '    AND (j.finalized_at IS NULL OR j.finalized_at > now() - $1)'
                 ' LIMIT $2)', v_slot, v_slot, v_slot, v_slot, v_slot)
    USING p_retention, v_left, v_cur;
  GET DIAGNOSTICS v_n = ROW_COUNT; v_left := v_left - v_n;
  -- Lane jobs not handed out (actor_worker_lane_waiting).
  FOR l IN SELECT k.queue, k.priority, p.tick_lo, p.tick_hi, p.to_xid, p.to_id
             FROM actor_worker_lanes() AS k
             LEFT JOIN LATERAL actor_worker_lane_head(k.queue, k.priority) AS p
               ON true LOOP
    EXIT WHEN v_left <= 0;
    EXECUTE format('UPDATE jobs_in SET slot = $8 WHERE slot = %s AND id IN ('
                   ' SELECT w.id FROM actor_worker_lane_waiting($1, $2, $3, $4, $5, $6,'
                   '   %s::smallint, %s::smallint) AS w'
                   ' LIMIT $7)', v_slot, v_slot, v_slot)
      USING l.queue, l.priority, l.tick_lo, l.tick_hi, l.to_xid, l.to_id, v_left, v_cur;
    GET DIAGNOSTICS v_n = ROW_COUNT; v_left := v_left - v_n;
  END LOOP;
  -- Lane batches unfinished or finished within the retention, and their
  -- jobs: one range scan of the slot's lane index per batch. The LIMIT in
  -- the lateral keeps it so: as a join, the planner merged the batches
  -- with the whole slot, comparing every pair (a soak's round ran for
  -- minutes under the lock).
  IF v_left > 0 THEN
    -- A batch a rescue took back ended then: its jobs without a receipt
    -- became rows (carried above), but those it completed before are still
    -- lane jobs, completed by their receipts within the retention while it
    -- is (a batch's receipts commit before its rescue: an outcome holds the
    -- batch FOR KEY SHARE, a transactional group its advisory lock, and the
    -- rescue tries that lock and takes it FOR UPDATE). Left behind,
    -- they and their receipts went with the slot, a completed job gone from
    -- `jobs` at once (the SQL schedules' seed 147 of 2026-12-07).
    SELECT coalesce(array_agg(b.id), '{}') INTO v_keep
      FROM job_batches AS b
     WHERE b.on_lane
       AND coalesce(b.finished_at, b.rescued_at, 'infinity') > now() - p_retention;
    EXECUTE format('UPDATE jobs_in SET slot = $3 WHERE slot = %s AND id IN ('
                   ' SELECT x.id FROM job_batches AS b CROSS JOIN LATERAL ('
                   '  SELECT r.id FROM jobs_slot_%s AS r'
                   '   WHERE r.queue = b.queue AND r.priority = b.priority'
                   '     AND r.ready_xid <> ''0'''
                   '     AND (r.ready_xid, r.id) >= (b.first_xid, b.first_id)'
                   '     AND r.ready_xid <= b.to_xid'
                   '     AND (r.ready_xid, r.id) <= (b.to_xid, b.to_id)'
                   '     AND pg_visible_in_snapshot(r.ready_xid, b.tick_hi)'
                   '     AND NOT pg_visible_in_snapshot(r.ready_xid, b.tick_lo)'
                   '   LIMIT $2) AS x'  -- keeps the loop (a plain join merged every pair)
                   '  WHERE b.id = ANY ($1) LIMIT $2)', v_slot, v_slot)
      USING v_keep, v_left, v_cur;
    GET DIAGNOSTICS v_n = ROW_COUNT; v_left := v_left - v_n;
  END IF;
  IF v_left <= 0 THEN
    -- Possibly more to carry: the next round goes on (the slot stays due).
    RETURN format('carried %s jobs of ring slot %s into slot %s; more next round',
                  p_max_carried - v_left, v_slot, v_cur);
  END IF;
  -- The batches kept: those, each lane's newest, row batches with running
  -- jobs; then their receipts.
  v_keep := v_keep || ARRAY(
    SELECT p.batch_id FROM (SELECT DISTINCT b.queue, b.priority FROM job_batches AS b
                             WHERE b.on_lane) AS k,
           LATERAL actor_worker_lane_head(k.queue, k.priority) AS p)
    || ARRAY(SELECT DISTINCT j.batch_id FROM jobs_in AS j
              WHERE j.state = 'running' AND j.batch_id IS NOT NULL);
  EXECUTE format('UPDATE job_batches SET slot = $2 WHERE slot = %s AND id = ANY ($1)',
                 v_slot) USING v_keep, v_cur;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  EXECUTE format('UPDATE batch_receipts SET slot = $2 WHERE slot = %s'
                 ' AND batch_id = ANY ($1)', v_slot) USING v_keep, v_cur;
  EXECUTE format('TRUNCATE jobs_slot_%s, job_batches_slot_%s, batch_receipts_slot_%s',
                 v_slot, v_slot, v_slot);
  UPDATE job_ring SET recycled_at[v_slot + 1] = now();
  RETURN format('emptied ring slot %s (carried %s jobs and %s batches into slot %s)',
                v_slot, p_max_carried - v_left, v_n, v_cur);
END
$$;
