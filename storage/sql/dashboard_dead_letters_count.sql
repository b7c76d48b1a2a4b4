-- How many dead letters a bulk action would take: dead letter $1 (0 =
-- any) of queue $2, kind $3 and fingerprint $4 ('' = any). Asked for
-- before a bulk action is confirmed, never to draw a page.
SELECT count(*) AS n FROM dead_letter_jobs AS d
 WHERE ($1::bigint = 0 OR d.id = $1::bigint)
   AND ($2 = '' OR d.queue = $2)
   AND ($3 = '' OR d.kind = $3)
   AND ($4 = '' OR d.fingerprint = $4)
