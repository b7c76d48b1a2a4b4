-- Dashboard dead letter list of one failure group: kind $2 and fingerprint
-- $3 (of queue $4, '' = any), below id $1, the newest $5, through
-- dead_letter_jobs_fingerprint_idx in id order. Returns the ids.
SELECT coalesce(array_agg(h.id ORDER BY h.id DESC), '{}') AS ids
  FROM (SELECT d.id FROM dead_letter_jobs AS d
         WHERE d.kind = $2 AND d.fingerprint = $3 AND d.id < $1
           AND ($4 = '' OR d.queue = $4)
         ORDER BY d.id DESC LIMIT $5) AS h
