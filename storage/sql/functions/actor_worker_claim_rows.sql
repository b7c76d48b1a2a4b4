-- The claim's part for jobs off the lanes (scheduled, retried, parked and
-- released jobs, ordering keys, unique jobs, kinds set aside): up to
-- p_limit due jobs of one queue and priority, in the order they came due,
-- of the kinds p_kinds (NULL: any), within p_max_bytes of args and
-- metadata (but at least one job when p_first), each row marked running
-- in the row batch p_batch. One row: the jobs as arrays in claim order
-- (`seen`, `stop`, `ids` and `bytes` as actor_worker_lane_pick has them);
-- `off` lists the due rows at the attempt limit (1,000,000), which it
-- moved to the dead letter queue.
-- FOR UPDATE SKIP LOCKED: concurrent claims take different rows and never
-- wait for each other. A job a rescue gave back without knowing whether
-- it had started (start_unknown) is recorded as started by this claim,
-- before its handler can run (migrations/002_job_starts.sql).
CREATE OR REPLACE FUNCTION actor_worker_claim_rows(
  p_queue text, p_priority integer, p_batch bigint, p_limit integer,
  p_max_bytes bigint, p_first boolean, p_kinds text[])
RETURNS TABLE (seen bigint, stop boolean, ids bigint[], kinds text[],
               args text[], att integer[], err integer[], max integer[],
               meta text[], dl bigint[], bytes bigint, xids xid8[],
               off bigint[], alien text[], px xid8, pi bigint)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
  WITH picked AS (
    SELECT j.id, j.run_at, j.attempt, j.start_unknown,
           pg_column_size(j.args) + pg_column_size(j.metadata) AS bytes
      FROM jobs_in AS j
     WHERE j.queue = p_queue AND j.priority = p_priority
       AND j.ready_xid = '0' AND j.state IN ('available', 'scheduled')
       AND j.run_at <= now()
       AND (p_kinds IS NULL OR j.kind = ANY (p_kinds))
       -- A row whose attempt cannot grow is dead-lettered by the rescue
       -- (actor_worker_rescue), never claimed: it must not stop its queue.
       -- A job with an ordering key waits for every earlier unfinished job
       -- of its key (one being claimed right now is still 'available' in
       -- this snapshot, so two of a key never run at once).
       AND (j.ordering_key IS NULL OR NOT EXISTS (
             SELECT 1 FROM jobs_in AS o
              WHERE o.ordering_key = j.ordering_key AND o.id < j.id
                AND o.state IN ('scheduled', 'available', 'running',
                                'waiting_external')))
     ORDER BY j.run_at, j.id
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED
  ), chosen AS (
    SELECT s.id, s.n, s.start_unknown FROM (
      SELECT p.id, p.start_unknown, row_number() OVER w AS n,
             sum(p.bytes) OVER w AS bytes
        FROM picked AS p WHERE p.attempt < 1000000
      WINDOW w AS (ORDER BY p.run_at, p.id)) AS s
     WHERE s.bytes <= p_max_bytes OR (s.n = 1 AND p_first)
  ), claimed AS (
    UPDATE jobs_in AS j
       SET state = 'running', attempt = j.attempt + 1, batch_id = p_batch,
           start_unknown = false
      FROM chosen
     WHERE j.id = chosen.id
    RETURNING chosen.n, chosen.start_unknown AS was_unknown, j.id, j.kind, j.args::text AS args, j.attempt,
              j.error_count, j.max_attempts, j.metadata::text AS metadata,
              j.deadline_ms,
              pg_column_size(j.args) + pg_column_size(j.metadata) AS bytes
  ), recorded AS (
    INSERT INTO job_starts (batch_id, ids)
    SELECT p_batch, array_agg(c.id) FROM claimed AS c WHERE c.was_unknown
    HAVING count(*) > 0
  )
  SELECT count(*), false, array_agg(c.id ORDER BY c.n),
         array_agg(c.kind ORDER BY c.n), array_agg(c.args ORDER BY c.n),
         array_agg(c.attempt ORDER BY c.n), array_agg(c.error_count ORDER BY c.n),
         array_agg(c.max_attempts ORDER BY c.n), array_agg(c.metadata ORDER BY c.n),
         array_agg(c.deadline_ms ORDER BY c.n), coalesce(sum(c.bytes), 0)::bigint,
         NULL::xid8[],
         (SELECT array_agg(p.id) FROM picked AS p WHERE p.attempt >= 1000000),
         NULL::text[], NULL::xid8, NULL::bigint
    INTO seen, stop, ids, kinds, args, att, err, max, meta, dl, bytes, xids, off,
         alien, px, pi
    FROM claimed AS c;
  -- Rows at the attempt limit cannot run again: dead-lettered at once.
  -- (Only when there are any: the statement opens every partition of jobs.)
  IF off IS NOT NULL THEN
    PERFORM actor_worker_dead_letter(j.id, format(
              'attempt limit reached: attempt %s, and a job runs at most '
              '1,000,000 times; set aside by a claim', j.attempt))
       FROM jobs_in AS j WHERE j.id = ANY (off) AND j.ready_xid = '0';
  END IF;
  RETURN NEXT;
END
$$;
