-- Trigger of the view `jobs` (INSTEAD OF INSERT, UPDATE or DELETE, row by
-- row): `jobs` shows every job with its live state and is read-only;
-- INSERT, INSERT ... ON CONFLICT and COPY write to jobs_in, and a job
-- changes through the CLI or the dashboard. Says so, naming the right one.
CREATE OR REPLACE FUNCTION actor_worker_jobs_read_only()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    RAISE EXCEPTION 'jobs is a read-only view (every job with its live state): enqueue into jobs_in'
      USING ERRCODE = 'wrong_object_type',
            HINT = 'INSERT INTO jobs_in (kind, args) VALUES (...), INSERT INTO jobs_in ... ON CONFLICT DO NOTHING, or COPY jobs_in (kind, queue, args) FROM STDIN; read back from jobs (docs/sql.md)';
  END IF;
  RAISE EXCEPTION 'jobs is a read-only view (every job with its live state): % changes no job', TG_OP
    USING ERRCODE = 'wrong_object_type',
          HINT = 'cancel, retry or run a job now with actor-worker jobs cancel|retry ID (docs/cli.md), or from the dashboard';
END
$$;
