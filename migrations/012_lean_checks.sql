-- 012: the same limits on a row for fewer instructions per row, measured
-- with callgrind on a COPY of 20,000 rows (bench/results/2026-12-07-copy.txt):
-- the checks were 9,000 instructions of a row's 59,000, half of it two
-- regular-expression calls. One call now tests kind and queue together
-- (jobs_names_printable: a control character in either forges a log line);
-- the lengths are integer comparisons; 'available', the state nearly every
-- insert writes, is compared first. What a row may hold is unchanged.
ALTER TABLE jobs_in
  DROP CONSTRAINT jobs_kind_valid,
  DROP CONSTRAINT jobs_queue_valid,
  DROP CONSTRAINT jobs_state_valid,
  ADD CONSTRAINT jobs_kind_valid CHECK (octet_length(kind) BETWEEN 1 AND 200),
  ADD CONSTRAINT jobs_queue_valid CHECK (octet_length(queue) BETWEEN 1 AND 200),
  ADD CONSTRAINT jobs_names_printable CHECK ((kind || queue) !~ '[[:cntrl:]]'),
  ADD CONSTRAINT jobs_state_valid CHECK (state IN ('available', 'running',
                                                   'completed', 'scheduled',
                                                   'waiting_external',
                                                   'cancelled'));
