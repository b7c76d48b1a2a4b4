-- What a run's outcome writes (docs/storage.md, concepts 4 and 5): lane
-- completions by receipt, the other outcomes of lane jobs made rows first
-- (materialize), and the row statements, each guarded by the run's lease.

-- name: complete_lane
-- Completions of lane jobs ($2 leases, $3 ids) of worker $1: one receipt
-- per batch (storage/sql/functions/actor_worker_complete.sql), the rows
-- deleted when $4 (completed_retention 0); the ids recorded.
SELECT actor_worker_complete($1, $2::bigint[], $3::bigint[], $4) AS id

-- name: lane_completed_rows
-- The rows of lane jobs $1 just completed, as jobs shows them now
-- (read in the transaction that wrote their receipts), for the events of
-- kinds that hooks or follow-ups observe.
SELECT v.id, to_jsonb(v)::text AS row_json FROM jobs AS v
 WHERE v.id = ANY ($1::bigint[])

-- name: materialize
-- Lane jobs ($2 leases, $3 ids) of worker $1 whose run ends other than by
-- completing become running rows of their batch, for the row statements
-- (storage/sql/functions/actor_worker_materialize.sql); the ids changed.
SELECT actor_worker_materialize($1, $2::bigint[], $3::bigint[]) AS id

-- name: complete
-- Completions of row-claimed jobs ($1 ids, $5 their leases), one statement
-- per batch: each only while its row is still running in that claim. A
-- finished job with an ordering key unblocks the next job of its key: wake
-- that queue's pollers (channel $4) rather than leave it to the idle poll.
-- $2: the worker (for the events); $3: the observed kinds.
WITH runs AS (
  SELECT * FROM unnest($1::bigint[], $5::bigint[]) AS r(id, lease)
), done AS (
  UPDATE jobs_in AS j
     SET state = 'completed', finalized_at = now()
    FROM runs
   WHERE j.id = runs.id AND j.batch_id = runs.lease AND j.state = 'running'
  RETURNING j.id, j.queue, j.ordering_key,
            CASE WHEN j.kind = ANY ($3::text[])
                 THEN actor_worker_job_json(j.id, jsonb_build_object(
                        'state', 'completed', 'finalized_at', now(),
                        'locked_by', $2::text)) END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) AS woken FROM done

-- name: complete_delete
-- complete.sql with completed_retention 0: the rows go at once.
WITH runs AS (
  SELECT * FROM unnest($1::bigint[], $5::bigint[]) AS r(id, lease)
), done AS (
  DELETE FROM jobs_in AS j
   USING runs
   WHERE j.id = runs.id AND j.batch_id = runs.lease AND j.state = 'running'
  RETURNING j.id, j.queue, j.ordering_key,
            CASE WHEN j.kind = ANY ($3::text[])
                 THEN (to_jsonb(j) - 'ready_xid' - 'batch_id' - 'slot'
                       || jsonb_build_object('state', 'completed',
                                             'finalized_at', now(),
                                             'locked_by', $2::text,
                                             'locked_at', NULL))::text END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) AS woken FROM done

-- name: close_batches
-- Lane batches whose receipts hold all their jobs but that are not marked
-- finished (two outcome commits each saw only its own receipt): marked,
-- with their last receipt's time. At most $1.
UPDATE job_batches AS b
   SET finished_at = r.at
  FROM (SELECT x.id, max(c.at) AS at
          FROM job_batches AS x JOIN batch_receipts AS c ON c.batch_id = x.id
         WHERE x.on_lane AND x.finished_at IS NULL AND x.rescued_at IS NULL
         GROUP BY x.id, x.size
        HAVING actor_worker_batch_done(x.id) >= x.size
         LIMIT $1) AS r
 WHERE b.id = r.id

-- name: retry
-- Job $1 of lease $2 failed and runs again after $5 ms, or (when $5 is
-- NULL) after the retry backoff (actor_worker_retry_backoff), unless this
-- failure was its last allowed attempt ($4: the worker's max_retries).
UPDATE jobs_in AS j
   SET state = 'scheduled', error_count = j.error_count + 1,
       last_error_message = $3, last_failed_at = now(),
       run_at = now() + coalesce($5::bigint * interval '1 millisecond',
                                 actor_worker_retry_backoff(j.error_count)),
       batch_id = NULL
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
   AND j.error_count + 1 < coalesce(j.max_attempts, $4::integer + 1)
   AND j.error_count < 999999
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'scheduled', 'error_count', j.error_count,
            'last_error_message', j.last_error_message,
            'last_failed_at', j.last_failed_at, 'run_at', j.run_at)) AS row_json

-- name: snooze
-- Job $1 of lease $2 runs again after $3 ms, not charged.
UPDATE jobs_in AS j
   SET state = 'scheduled', run_at = now() + $3::bigint * interval '1 millisecond',
       batch_id = NULL
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'scheduled', 'run_at', j.run_at)) AS row_json

-- name: wait
-- Job $1 of lease $2 parks waiting for a callback for at most $3 ms. The
-- callback id comes from gen_random_uuid(): 122 random bits from a
-- cryptographic source, so nobody can guess a waiting job's id. An id this
-- run registered while it ran (callback_register.sql) is kept, with its
-- timeout, and so is a resolution that came for it meanwhile (`early`,
-- which the caller applies at once, in this transaction). The row is
-- locked first (FOR UPDATE): a resolution kept concurrently is then seen,
-- never overwritten.
WITH run AS (
  SELECT j.id, j.callback_lease IS NOT DISTINCT FROM $2::bigint AS registered,
         j.callback_early
    FROM jobs_in AS j
   WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
     FOR UPDATE OF j
)
UPDATE jobs_in AS j
   SET state = 'waiting_external',
       callback_id = CASE WHEN r.registered THEN j.callback_id
                          ELSE gen_random_uuid() END,
       callback_timeout_at =
         CASE WHEN r.registered THEN j.callback_timeout_at
              ELSE now() + $3::bigint * interval '1 millisecond' END,
       callback_result = NULL, batch_id = NULL, callback_lease = NULL,
       callback_early = NULL
  FROM run AS r
 WHERE j.id = r.id AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'waiting_external', 'callback_id', j.callback_id,
            'callback_timeout_at', j.callback_timeout_at,
            'callback_result', NULL)) AS row_json,
          j.callback_id::text AS callback_id,
          CASE WHEN r.registered THEN r.callback_early END::text AS early

-- name: cancel
-- The handler of job $1 (lease $2) cancelled it, reason $3. A job of an
-- ordering key wakes its queue (channel $4): the next of its key may run.
UPDATE jobs_in AS j
   SET state = 'cancelled', finalized_at = now(), last_error_message = $3
 WHERE j.id = $1 AND j.batch_id = $2 AND j.state = 'running'
RETURNING actor_worker_job_json(j.id, jsonb_build_object(
            'state', 'cancelled', 'finalized_at', j.finalized_at,
            'last_error_message', $3::text)) AS row_json,
          CASE WHEN j.ordering_key IS NOT NULL
               THEN pg_notify($4, j.queue) END AS woken

-- name: dead_letter
-- The run of job $1 (lease $2) failed for good, or on its last allowed
-- attempt: the job moves to the dead letter queue with $3 as its last
-- error (actor_worker_dead_letter). A job of an ordering key wakes its
-- queue (channel $4): the next of its key may run.
SELECT actor_worker_dead_letter(j.id, $3) AS row_json,
       CASE WHEN j.ordering_key IS NOT NULL THEN pg_notify($4, j.queue) END AS woken
  FROM (SELECT r.id, r.ordering_key, r.queue FROM jobs_in AS r
         WHERE r.id = $1 AND r.batch_id = $2 AND r.state = 'running'
           FOR UPDATE) AS j
