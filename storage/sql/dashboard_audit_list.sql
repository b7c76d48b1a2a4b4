-- The newest audit log rows below id $1, at most $2, as one JSON array
-- (the first 20 job ids of each), with how many there are and the lowest
-- id (where the next page starts when the page is full).
WITH a AS (
  SELECT * FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2
)
SELECT coalesce(json_agg(json_build_object(
         'id', a.id, 'at', a.at, 'action', a.action, 'target', a.target,
         'affected', a.affected, 'job_ids', a.job_ids[1:20],
         'outcome', a.outcome, 'remote_addr', a.remote_addr,
         'user_agent', a.user_agent, 'worker', a.worker)
         ORDER BY a.id DESC), '[]')::text AS rows,
       count(*) AS n, min(a.id) AS low
  FROM a
