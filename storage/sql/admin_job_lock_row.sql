-- Locks job $1's row for the rest of the transaction: a row claim in
-- flight is waited for, and the next statement sees what it committed.
SELECT 1 FROM jobs_in WHERE id = $1 FOR UPDATE
