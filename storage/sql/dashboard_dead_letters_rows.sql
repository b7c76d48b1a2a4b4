-- The dashboard's list rows of dead letters $1 (an array of ids), newest
-- first, as one JSON array: no args or metadata, the error cut to 300
-- characters.
SELECT coalesce(json_agg(json_build_object(
         'id', d.id, 'original_job_id', d.original_job_id, 'kind', d.kind,
         'queue', d.queue, 'priority', d.priority, 'attempt', d.attempt,
         'max_attempts', d.max_attempts, 'error_count', d.error_count,
         'last_error_message', left(d.last_error_message, 300),
         'fingerprint', d.fingerprint, 'created_at', d.created_at,
         'failed_at', d.failed_at, 'tags', d.tags)
         ORDER BY d.id DESC), '[]')::text AS rows
  FROM dead_letter_jobs AS d
 WHERE d.id = ANY ($1::bigint[])
