-- The job of callback $1, whatever became of it: why a callback changed
-- nothing (no such callback, or its job no longer waits: finished, back in
-- the queue, or dead-lettered by an earlier resolution).
SELECT id::text AS id, state FROM jobs WHERE callback_id = $1::uuid
UNION ALL
SELECT original_job_id::text, 'dead_lettered'
  FROM dead_letter_jobs WHERE callback_id = $1::uuid
LIMIT 1
