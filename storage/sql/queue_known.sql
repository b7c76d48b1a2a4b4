-- Whether queue $1 is known to the database: it has a queue_controls row
-- (every worker writes one for each queue it serves), a job, or a dead
-- letter.
SELECT EXISTS (SELECT 1 FROM queue_controls WHERE queue = $1)
       OR EXISTS (SELECT 1 FROM jobs_in WHERE queue = $1 LIMIT 1)
       OR EXISTS (SELECT 1 FROM dead_letter_jobs WHERE queue = $1) AS known
