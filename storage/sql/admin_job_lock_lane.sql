-- Takes the claim cursor of lane ($1, $2) for the rest of the transaction:
-- a claim of that lane waits (and one in flight is waited for), so the
-- next statement sees whether the job was claimed and no claim takes it
-- meanwhile. Claims of a lane take turns on this row.
SELECT 1 FROM claim_cursors AS c
 WHERE c.queue = $1 AND c.priority = $2
   FOR UPDATE
