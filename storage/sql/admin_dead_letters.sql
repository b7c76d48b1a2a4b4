-- The newest $1 dead letters (of queue $2, or of every queue when $2 is
-- empty) as one JSON array.
SELECT coalesce(json_agg(d ORDER BY d.failed_at DESC, d.id DESC), '[]')::text
       AS dead_letters
  FROM (SELECT * FROM dead_letter_jobs
         WHERE ($2 = '' OR queue = $2)
         ORDER BY failed_at DESC, id DESC LIMIT $1) AS d
