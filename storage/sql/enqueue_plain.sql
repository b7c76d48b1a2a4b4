-- The bulk path for jobs with nothing but kind, queue, args and priority
-- (due at once, default everything else): one array per column, which the
-- server reads far faster than a JSON document per row. Such jobs always
-- go on their queue's lane.
INSERT INTO jobs_in (kind, queue, args, priority)
SELECT u.kind, u.queue, u.args, u.priority
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::integer[])
       AS u(kind, queue, args, priority)
RETURNING id
