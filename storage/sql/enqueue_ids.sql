-- $1 new job ids, ascending, from the sequence of jobs.id: a bulk enqueue
-- by COPY (which returns nothing) takes its ids first.
SELECT nextval(pg_get_serial_sequence('jobs_in', 'id')) AS id
  FROM generate_series(1, $1::bigint)
 ORDER BY 1
