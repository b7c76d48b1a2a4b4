-- A running job can register its callback id before it parks
-- (job_context::register_callback; for command and HTTP kinds,
-- `callback_timeout`), so that it can hand the id on while it runs. A
-- resolution that comes before the job parks is kept, and applied as it
-- parks (docs/callbacks.md).

-- The lease (job_batches.id) of the run that registered callback_id while
-- it ran; NULL when the id was assigned as the job parked. The park keeps
-- the id only when this is its own run's lease: an id registered by an
-- earlier run is never reused.
ALTER TABLE jobs ADD COLUMN callback_lease bigint;
-- A resolution of the registered id that came while the job still ran:
-- {"action": "complete" | "fail" | "retry" | "resume", "payload": ...,
-- "error": "..."}. Applied, in the same transaction, when that run parks
-- the job; ignored by any other outcome.
ALTER TABLE jobs ADD COLUMN callback_early jsonb;
