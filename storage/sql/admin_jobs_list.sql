-- One page of `jobs list`: at most $5 jobs of `jobs` with id > $1, in id
-- order (keyset pagination: the next page starts after the last id),
-- optionally of state $2, queue $3 and kind $4 ('' = any), as one JSON
-- array. No count: the page stops at the limit. Sent with its parameters
-- (planned for them): a state filter leaves only the view's branches that
-- can hold that state.
SELECT coalesce(json_agg(p.j ORDER BY p.id), '[]')::text AS jobs
  FROM (SELECT j.id, row_to_json(j) AS j
          FROM jobs AS j
         WHERE j.id > $1
           AND ($2 = '' OR j.state = $2)
           AND ($3 = '' OR j.queue = $3)
           AND ($4 = '' OR j.kind = $4)
         ORDER BY j.id
         LIMIT $5) AS p
