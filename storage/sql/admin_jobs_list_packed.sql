-- The packed part of a `jobs list` page (admin_jobs_list.sql is the
-- `jobs` part; packed ids are above every other): at most $5 rows of
-- `packed_jobs` with id > $1, in id order, optionally of state $2, queue $3
-- and kind $4 ('' = any), as one JSON array. Packs are read in id order
-- from the first that can hold an id past $1, and the page stops at the
-- limit (an incremental sort on the pack order).
SELECT coalesce(json_agg(p.j ORDER BY p.id), '[]')::text AS jobs
  FROM (SELECT j.id, row_to_json(j) AS j
          FROM job_packs AS k
          CROSS JOIN LATERAL actor_worker_pack_jobs(k) AS j
         WHERE k.first_id > $1::bigint - 1024
           AND j.id > $1::bigint
           AND ($2 = '' OR j.state = $2)
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
         ORDER BY k.first_id, j.id
         LIMIT $5) AS p
