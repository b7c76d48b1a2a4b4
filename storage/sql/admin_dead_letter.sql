-- Dead letter $1 (dead_letter_jobs.id, as `dlq list` shows it) as JSON.
SELECT row_to_json(d)::text AS dead_letter
  FROM dead_letter_jobs AS d WHERE d.id = $1
