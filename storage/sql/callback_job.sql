-- The job of callback $1, whatever its state: why a callback changed
-- nothing (no such callback, or its job no longer waits).
SELECT id, state FROM jobs WHERE callback_id = $1::uuid
