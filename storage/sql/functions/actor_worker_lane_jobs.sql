-- The jobs of one tick of a lane (queue, priority), in lane order (their
-- ready_xid, then id), after the position (p_after_xid, p_after_id): at
-- most p_limit of the jobs whose ready_xid is visible in the snapshot
-- p_hi but not in p_lo. Nobody waits for a transaction still open: its
-- jobs are in a later tick, once it commits.
--
-- The transactions that committed between the two snapshots are the ones
-- p_lo saw running (its xip list) that p_hi sees committed, and those from
-- p_lo's xmax up to p_hi's xmax that p_hi sees committed. Each part reads
-- only jobs not yet handed out: an open transaction elsewhere in the
-- cluster never makes a claim read again what earlier ticks took.
-- Lane jobs never have a unique key (actor_worker_jobs_inserted moves such
-- jobs off the lanes): saying so leaves jobs_unique out at plan time.
-- Only ring slots p_slot_from to p_slot_to are read (all of them: -32768,
-- 32767): a claim reads the jobs it picked again from the slots that hold
-- them, and the other slots are pruned before its scan opens them.
CREATE OR REPLACE FUNCTION actor_worker_lane_jobs(
  p_queue text, p_priority integer, p_lo pg_snapshot, p_hi pg_snapshot,
  p_after_xid xid8, p_after_id bigint, p_limit integer,
  p_slot_from smallint, p_slot_to smallint)
RETURNS TABLE (ready_xid xid8, id bigint, kind text, state text,
               run_at timestamptz, attempt integer, error_count integer,
               max_attempts integer, deadline_ms bigint, ordering_key text,
               unique_key text, slot smallint, args text, metadata text,
               bytes bigint)
LANGUAGE sql STABLE
AS $$
  SELECT u.ready_xid, u.id, u.kind, u.state, u.run_at, u.attempt,
         u.error_count, u.max_attempts, u.deadline_ms, u.ordering_key,
         u.unique_key, u.slot, u.args::text, u.metadata::text,
         pg_column_size(u.args) + pg_column_size(u.metadata)
    FROM ((SELECT j.*
             FROM pg_snapshot_xip(p_lo) AS x(xid)
             CROSS JOIN LATERAL (
               SELECT r.* FROM jobs_in AS r
                WHERE r.queue = p_queue AND r.priority = p_priority
                  AND r.ready_xid <> '0' AND r.unique_key IS NULL
                  AND r.slot >= p_slot_from AND r.slot <= p_slot_to
                  -- The transaction's jobs past the position, as a range
                  -- of the lane index. Not `ready_xid = x.xid AND id >
                  -- after`: with ready_xid fixed the order is by id alone,
                  -- which the id index gives too, and the generic plan of a
                  -- slot with history read the whole slot by id, filtering
                  -- every row, on each claim after a late commit.
                  AND (r.ready_xid, r.id) >
                      (x.xid, CASE WHEN x.xid = p_after_xid THEN p_after_id
                                   ELSE -9223372036854775808 END)
                  AND r.ready_xid <= x.xid
                ORDER BY r.ready_xid, r.id
                LIMIT p_limit) AS j
            WHERE x.xid >= p_after_xid
              AND pg_visible_in_snapshot(x.xid, p_hi))
          UNION ALL
          (SELECT r.*
             FROM jobs_in AS r
            WHERE r.queue = p_queue AND r.priority = p_priority
              AND r.ready_xid <> '0' AND r.unique_key IS NULL
              AND r.slot >= p_slot_from AND r.slot <= p_slot_to
              -- One lower bound, so that the index scan starts at the
              -- position: given as two (xmax(lo), and the position as a
              -- row), btree may start from the first and filter up to the
              -- second, reading the whole tick again on every claim.
              AND (r.ready_xid, r.id) >
                  (CASE WHEN p_after_xid >= pg_snapshot_xmax(p_lo) THEN p_after_xid
                        ELSE pg_snapshot_xmax(p_lo) END,
                   CASE WHEN p_after_xid >= pg_snapshot_xmax(p_lo) THEN p_after_id
                        ELSE -9223372036854775808 END)
              AND r.ready_xid < pg_snapshot_xmax(p_hi)
              AND pg_visible_in_snapshot(r.ready_xid, p_hi)
            ORDER BY r.ready_xid, r.id
            LIMIT p_limit)) AS u
   ORDER BY u.ready_xid, u.id
   LIMIT p_limit
$$;
