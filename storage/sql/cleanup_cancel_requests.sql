-- Cancel requests whose job finished or is gone (at most $1): they did
-- their work, or came too late. A request for an unfinished job stays.
DELETE FROM job_cancel_requests WHERE job_id IN (
  SELECT q.job_id FROM job_cancel_requests AS q
   WHERE NOT EXISTS (SELECT 1 FROM jobs AS j
                      WHERE j.id = q.job_id
                        AND j.state NOT IN ('completed', 'cancelled'))
   LIMIT $1)
