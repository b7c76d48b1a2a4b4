-- The leader's rescue of what gone workers held (docs/storage.md, concept 8).

-- name: rescue
-- The cluster's rescue (storage/sql/functions/actor_worker_rescue.sql):
-- jobs of workers not seen for $1 s (or stopped), and callbacks that timed
-- out; $2: max_retries; at most $3 jobs.
SELECT id, kind, queue, reason, dead, message, row_json AS row
  FROM actor_worker_rescue($1, $2, $3)
