// The jobs whose handlers a worker recorded as started (job_starts,
// docs/storage.md concept 8): a rescue charges only those, so a test that
// kills a worker and counts charges waits for this count first.
#pragma once

namespace aw::test {

/// Distinct job ids in job_starts; append " WHERE i IN (...)" to narrow.
inline constexpr const char* recorded_starts_sql =
  "SELECT count(DISTINCT i) FROM job_starts, unnest(ids) AS i";

} // namespace aw::test
