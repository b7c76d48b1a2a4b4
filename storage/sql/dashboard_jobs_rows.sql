-- The dashboard's list rows of jobs $1 (an array of ids), as jobs
-- shows them, newest first, as one JSON array: the columns a list shows,
-- the error cut to 300 characters, no args or metadata.
SELECT coalesce(json_agg(json_build_object(
         'id', j.id, 'state', j.state, 'queue', j.queue, 'kind', j.kind,
         'priority', j.priority, 'attempt', j.attempt,
         'max_attempts', j.max_attempts, 'error_count', j.error_count,
         'run_at', j.run_at, 'created_at', j.created_at,
         'finalized_at', j.finalized_at, 'locked_by', j.locked_by,
         'last_error_message', left(j.last_error_message, 300),
         'tags', j.tags)
         ORDER BY j.id DESC), '[]')::text AS rows
  FROM jobs AS j WHERE j.id = ANY ($1::bigint[])
