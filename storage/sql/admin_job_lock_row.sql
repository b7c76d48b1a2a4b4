-- Locks job $1's row for the rest of the transaction: a row-per-state claim
-- in flight is waited for, and the next statement sees what it committed
-- (a change through the `jobs` view must not rely on the view's state as
-- of an older snapshot).
SELECT 1 FROM job_rows WHERE id = $1 FOR UPDATE
