-- `dlq purge`: deletes the dead letters that failed more than $1 seconds
-- ago (a negative $1: all of them), of queue $2 ('' = any).
DELETE FROM dead_letter_jobs AS d
 WHERE ($1::double precision < 0
        OR d.failed_at < now() - make_interval(secs => $1::double precision))
   AND ($2 = '' OR d.queue = $2)
