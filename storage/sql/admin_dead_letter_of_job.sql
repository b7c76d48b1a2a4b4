-- The latest dead letter of job $1, as JSON.
SELECT row_to_json(d)::text AS dead_letter
  FROM dead_letter_jobs AS d
 WHERE d.original_job_id = $1
 ORDER BY d.failed_at DESC LIMIT 1
