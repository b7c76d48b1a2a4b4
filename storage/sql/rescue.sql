-- Cluster-wide rescue of running jobs whose lease is older than the reclaim
-- window ($1 s), and of waiting jobs whose callback timed out. Each is
-- charged a failed attempt and rescheduled with the usual backoff, or
-- dead-lettered when it was its last. SKIP LOCKED makes it safe on every
-- node at once. Deadlines are enforced by the node that runs the job
-- (from the moment its handler starts), so they need no rescue here. A
-- running row without a lease time, or a waiting one without a timeout
-- (only plain SQL makes them), counts as expired: it would otherwise block
-- its ordering key forever.
WITH stale AS (
  SELECT id, r.reason,
         CASE r.reason
           WHEN 'expired_callback'
           THEN 'callback expired: no callback for ' || coalesce(callback_id::text, '?')
                || coalesce(' by ' || callback_timeout_at, ' (it had no timeout)')
           ELSE 'lease expired: worker ' || coalesce(locked_by, '?')
                || coalesce(' stopped heartbeating (last heartbeat at '
                            || locked_at || ')',
                            ' holds it without a heartbeat time')
         END AS message
    FROM job_rows,
         LATERAL (SELECT CASE WHEN state = 'waiting_external'
                              THEN 'expired_callback'
                              ELSE 'stale_heartbeat' END AS reason) AS r
   WHERE (state = 'running'
          AND (locked_at IS NULL
               OR locked_at < now() - make_interval(secs => $1::double precision)))
      OR (state = 'waiting_external'
          AND (callback_timeout_at IS NULL OR callback_timeout_at < now()))
   ORDER BY id
   LIMIT $3
   FOR UPDATE OF job_rows SKIP LOCKED
), retried AS (
  UPDATE job_rows AS j
     SET state = 'scheduled', error_count = j.error_count + 1,
         last_error_message = stale.message, last_failed_at = now(),
         run_at = now() + actor_worker_retry_backoff(j.error_count),
         locked_by = NULL, locked_at = NULL, deadline_at = NULL
    FROM stale
   WHERE j.id = stale.id
     AND j.error_count + 1 < coalesce(j.max_attempts, $2::integer + 1)
  RETURNING j.id, j.kind, j.queue, stale.reason, false AS dead, stale.message,
            actor_worker_row_json(j)::text AS row
), dead AS (
  DELETE FROM job_rows AS j USING stale
   WHERE j.id = stale.id
     AND j.error_count + 1 >= coalesce(j.max_attempts, $2::integer + 1)
  RETURNING j AS job, stale.reason, stale.message
)
SELECT id, kind, queue, reason, dead, message, row FROM retried
UNION ALL
SELECT (d.job).id, (d.job).kind, (d.job).queue, d.reason, true, d.message,
       to_jsonb(actor_worker_dead_letter(d.job, d.message))::text
  FROM dead AS d
 ORDER BY 1
