-- The bulk path for jobs with nothing but kind, queue, args and priority
-- (due at once, default everything else): one array per column, which the
-- server reads far faster than a JSON document per row. Such jobs always
-- go on their queue's lane, in the current lane partition (019, 021).
INSERT INTO job_rows (kind, queue, args, priority, ready_xid, lane_gen)
SELECT u.kind, u.queue, u.args, u.priority, pg_current_xact_id(),
       (SELECT max(g.gen) FROM lane_generations AS g
         WHERE g.started_at <= now())
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::integer[])
       AS u(kind, queue, args, priority)
RETURNING id
