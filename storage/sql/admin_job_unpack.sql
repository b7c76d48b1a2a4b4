-- Gives job $1 a row of its own if it is still in its pack (migrations/
-- 020_job_packs.sql), so that the statements after this one can change it
-- through the `jobs` view; does nothing for any other job.
SELECT actor_worker_unpack(ARRAY[$1::bigint]) AS unpacked
