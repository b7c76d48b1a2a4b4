-- One chunk of a lane's tick for the claim (actor_worker_claim): reads the
-- next p_chunk jobs of the tick (p_lo, p_hi) after the position (p_px,
-- p_pi) (actor_worker_lane_jobs) and picks those the claim takes (`ids`,
-- `xids`, in lane order: up to p_want, within p_max_bytes of args and
-- metadata but at least one when p_first) and those that go off the lane
-- (`off`), to be claimed as rows: not due, keyed, not 'available', of a
-- kind p_kinds (NULL: any) lacks (`alien`: their kinds), or of a limited
-- queue (p_all_off). `seen`: how many it read (fewer than p_chunk: the
-- tick is used up); `stop`: it stopped at a job it could take but had no
-- room for; `px`, `pi`: the last job it read; `slot_from`, `slot_to`:
-- the lowest and highest ring slot that holds a picked job.
-- It returns no column of the jobs it picks: once the `off` jobs left the
-- lane, the picked ones are the next cardinality(ids) jobs of the lane
-- after the same position, and the claim reads them again straight into
-- its result. Carrying their args, kinds and metadata through arrays cost
-- more than reading them twice (a claim of 1,800 jobs: measured in
-- bench/results/2026-12-04-claim-reads-twice.txt).
-- Due means run_at <= clock_timestamp(), not now(): the tick's snapshot is
-- taken after the claim's transaction began, so it sees jobs of
-- transactions that began later, whose run_at (their now()) is after the
-- claim's now(); judged by now(), every such job looked scheduled and went
-- off the lane (a steady producer moved most of its jobs off).
CREATE OR REPLACE FUNCTION actor_worker_lane_pick(
  p_queue text, p_priority integer, p_lo pg_snapshot, p_hi pg_snapshot,
  p_px xid8, p_pi bigint, p_chunk integer, p_want integer, p_max_bytes bigint,
  p_first boolean, p_kinds text[], p_all_off boolean)
RETURNS TABLE (seen bigint, stop boolean, ids bigint[], xids xid8[],
               bytes bigint, off bigint[], alien text[], px xid8, pi bigint,
               slot_from smallint, slot_to smallint)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  -- (The rows come in lane order, and the aggregates keep it.)
  SELECT count(*), coalesce(bool_or(t.ok AND NOT t.take), false),
         array_agg(t.id) FILTER (WHERE t.take),
         array_agg(t.ready_xid) FILTER (WHERE t.take),
         coalesce(sum(t.bytes) FILTER (WHERE t.take), 0)::bigint,
         array_agg(t.id) FILTER (WHERE NOT t.ok),
         array_agg(t.kind) FILTER (WHERE t.alien),
         (array_agg(t.ready_xid))[count(*)], (array_agg(t.id))[count(*)],
         min(t.slot) FILTER (WHERE t.take), max(t.slot) FILTER (WHERE t.take)
    FROM (SELECT w.*, w.ok AND w.n <= p_want
                      AND (w.b <= p_max_bytes OR (w.n = 1 AND p_first)) AS take
            FROM (SELECT x.*, count(*) FILTER (WHERE x.ok) OVER o AS n,
                         sum(x.bytes) FILTER (WHERE x.ok) OVER o AS b
                    FROM (SELECT y.ready_xid, y.id, y.kind, y.bytes, y.slot,
                                 (p_kinds IS NOT NULL AND NOT (y.kind = ANY (p_kinds))) AS alien,
                                 (y.state = 'available' AND y.run_at <= clock_timestamp()
                                  AND y.ordering_key IS NULL AND y.unique_key IS NULL
                                  AND y.attempt < 999999 AND NOT p_all_off
                                  AND (p_kinds IS NULL OR y.kind = ANY (p_kinds))) AS ok
                            FROM actor_worker_lane_jobs(p_queue, p_priority, p_lo, p_hi,
                                                        p_px, p_pi, p_chunk,
                                                        (-32768)::smallint, 32767::smallint) AS y) AS x
                  WINDOW o AS (ORDER BY x.ready_xid, x.id)) AS w) AS t;
END
$$;
