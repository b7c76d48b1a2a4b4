-- `actor-worker dead-letters ...`: an operator's reads and changes of the dead
-- letter queue (docs/cli.md).

-- name: admin_dead_letters
-- The newest $1 dead letters (of queue $2, or of every queue when $2 is
-- empty) as one JSON array.
SELECT coalesce(json_agg(d ORDER BY d.failed_at DESC, d.id DESC), '[]')::text
       AS dead_letters
  FROM (SELECT * FROM dead_letter_jobs
         WHERE ($2 = '' OR queue = $2)
         ORDER BY failed_at DESC, id DESC LIMIT $1) AS d

-- name: admin_dead_letter
-- Dead letter $1 (dead_letter_jobs.id, as `dlq list` shows it) as JSON.
SELECT row_to_json(d)::text AS dead_letter
  FROM dead_letter_jobs AS d WHERE d.id = $1

-- name: admin_dead_letter_of_job
-- The latest dead letter of job $1, as JSON.
SELECT row_to_json(d)::text AS dead_letter
  FROM dead_letter_jobs AS d
 WHERE d.original_job_id = $1
 ORDER BY d.failed_at DESC LIMIT 1

-- name: admin_dead_letters_retry
-- `dlq retry`: moves dead letters back into `jobs` as fresh jobs (attempt
-- and error count 0, due now), in one statement: dead letter $1 (0 = any)
-- of queue $2, kind $3 and error fingerprint $4 ('' = any; see
-- migrations/011_dashboard.sql). Args, priority, max_attempts,
-- metadata and tags are kept; metadata gains "retried_from_dead_letter":
-- {"dead_letter_id": ..., "original_job_id": ...} (replacing an earlier
-- one). Returns one row per new job, in dead letter id order.
WITH moved AS (
  DELETE FROM dead_letter_jobs AS d
   WHERE ($1::bigint = 0 OR d.id = $1::bigint)
     AND ($2 = '' OR d.queue = $2)
     AND ($3 = '' OR d.kind = $3)
     AND ($4 = '' OR d.fingerprint = $4)
  RETURNING d.*
)
INSERT INTO jobs_in (kind, queue, args, priority, max_attempts, metadata, tags)
SELECT m.kind, m.queue, m.args, m.priority, m.max_attempts,
       m.metadata || jsonb_build_object(
         'retried_from_dead_letter',
         jsonb_build_object('dead_letter_id', m.id,
                            'original_job_id', m.original_job_id)),
       m.tags
  FROM moved AS m
 ORDER BY m.id
RETURNING id, kind, queue,
          (metadata -> 'retried_from_dead_letter' ->> 'dead_letter_id')::bigint
            AS dead_letter_id,
          (metadata -> 'retried_from_dead_letter' ->> 'original_job_id')::bigint
            AS original_job_id

-- name: admin_dead_letters_purge
-- `dlq purge`: deletes the dead letters that failed more than $1 seconds
-- ago (a negative $1: all of them), of queue $2 ('' = any).
DELETE FROM dead_letter_jobs AS d
 WHERE ($1::double precision < 0
        OR d.failed_at < now() - make_interval(secs => $1::double precision))
   AND ($2 = '' OR d.queue = $2)
