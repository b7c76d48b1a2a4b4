#include "storage/job_store.hpp"

#include <algorithm>

#include <pqxx/pqxx>

#include "config/defaults.hpp"

namespace aw::storage {

namespace {

// -- the named queries ---------------------------------------------------------
// Every statement that touches a running row checks `locked_by`, so an
// outcome that arrives after the job was released or reclaimed changes
// nothing.

constexpr const char* claim_sql = R"sql(
WITH picked AS (
  SELECT id FROM jobs
   WHERE queue = $1 AND state IN ('available', 'scheduled') AND run_at <= now()
   ORDER BY priority, run_at, id
   LIMIT $3
   FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE jobs AS j
     SET state = 'running', attempt = j.attempt + 1,
         locked_by = $2, locked_at = now(),
         deadline_at = CASE WHEN coalesce(j.deadline_ms, $4) > 0
                            THEN now() + coalesce(j.deadline_ms, $4)
                                         * interval '1 millisecond' END
    FROM picked
   WHERE j.id = picked.id
  RETURNING j.id, j.kind, j.queue, j.args::text AS args, j.priority, j.run_at,
            j.attempt, j.error_count, coalesce(j.max_attempts, 0) AS max_attempts,
            j.metadata::text AS metadata,
            coalesce(j.deadline_ms, $4) AS deadline_ms
)
SELECT id, kind, queue, args, priority, attempt, error_count, max_attempts,
       metadata, deadline_ms
  FROM claimed ORDER BY priority, run_at, id
)sql";

constexpr const char* complete_sql = R"sql(
UPDATE jobs SET state = 'completed', finalized_at = now()
 WHERE id = ANY($1::bigint[]) AND state = 'running' AND locked_by = $2
RETURNING id
)sql";

constexpr const char* complete_delete_sql = R"sql(
DELETE FROM jobs
 WHERE id = ANY($1::bigint[]) AND state = 'running' AND locked_by = $2
RETURNING id
)sql";

// Reschedules after 2^(error_count + 1) s unless this failure was the job's
// last allowed attempt; the exponent is capped only to keep the interval
// representable.
constexpr const char* retry_sql = R"sql(
UPDATE jobs
   SET state = 'scheduled', error_count = error_count + 1,
       last_error_message = $3, last_failed_at = now(),
       run_at = now() + make_interval(secs => power(2, least(error_count + 1, 40))),
       locked_by = NULL, locked_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2
   AND error_count + 1 < coalesce(max_attempts, $4::integer + 1)
RETURNING id
)sql";

constexpr const char* dead_letter_sql = R"sql(
WITH moved AS (
  DELETE FROM jobs WHERE id = $1 AND state = 'running' AND locked_by = $2
  RETURNING *
)
INSERT INTO dead_letter_jobs
  (original_job_id, kind, queue, args, priority, attempt, max_attempts,
   error_count, last_error_message, created_at, failed_at, metadata, tags)
SELECT id, kind, queue, args, priority, attempt, max_attempts,
       error_count + 1, $3, created_at, now(), metadata, tags
  FROM moved
RETURNING id
)sql";

constexpr const char* release_sql = R"sql(
WITH released AS (
  UPDATE jobs SET state = 'available', locked_by = NULL, locked_at = NULL
   WHERE id = ANY($1::bigint[]) AND state = 'running' AND locked_by = $2
  RETURNING queue
), woken AS (
  SELECT pg_notify($3, q.queue) FROM (SELECT DISTINCT queue FROM released) AS q
)
SELECT (SELECT count(*) FROM released), (SELECT count(*) FROM woken)
)sql";

// One statement for every running job of this worker.
constexpr const char* heartbeat_sql = R"sql(
UPDATE jobs SET locked_at = now()
 WHERE id = ANY($1::bigint[]) AND state = 'running' AND locked_by = $2
RETURNING id
)sql";

// Cluster-wide rescue of running jobs whose lease is older than the reclaim
// window ($1 s) or whose deadline passed more than a grace ($4 s) ago (the
// owner gets the grace to cancel the run itself). Each is charged a failed
// attempt and rescheduled with the usual backoff, or dead-lettered when it
// was its last. SKIP LOCKED makes it safe on every node at once.
constexpr const char* rescue_sql = R"sql(
WITH stale AS (
  SELECT id,
         (deadline_at IS NOT NULL
          AND deadline_at < now() - make_interval(secs => $4::double precision))
           AS overdue,
         CASE
           WHEN deadline_at IS NOT NULL
                AND deadline_at < now() - make_interval(secs => $4::double precision)
           THEN 'deadline exceeded: the run on ' || coalesce(locked_by, '?')
                || ' passed its deadline (' || deadline_at || ') and was not ended'
           ELSE 'lease expired: worker ' || coalesce(locked_by, '?')
                || ' stopped heartbeating (last heartbeat at ' || locked_at || ')'
         END AS message
    FROM jobs
   WHERE state = 'running'
     AND (locked_at < now() - make_interval(secs => $1::double precision)
          OR deadline_at < now() - make_interval(secs => $4::double precision))
   ORDER BY id
   LIMIT $3
   FOR UPDATE SKIP LOCKED
), retried AS (
  UPDATE jobs AS j
     SET state = 'scheduled', error_count = j.error_count + 1,
         last_error_message = stale.message, last_failed_at = now(),
         run_at = now() + make_interval(secs => power(2, least(j.error_count + 1, 40))),
         locked_by = NULL, locked_at = NULL, deadline_at = NULL
    FROM stale
   WHERE j.id = stale.id
     AND j.error_count + 1 < coalesce(j.max_attempts, $2::integer + 1)
  RETURNING j.id, j.kind, stale.overdue, false AS dead, stale.message
), dead AS (
  DELETE FROM jobs AS j USING stale
   WHERE j.id = stale.id
     AND j.error_count + 1 >= coalesce(j.max_attempts, $2::integer + 1)
  RETURNING j.*, stale.overdue, stale.message AS rescue_message
), buried AS (
  INSERT INTO dead_letter_jobs
    (original_job_id, kind, queue, args, priority, attempt, max_attempts,
     error_count, last_error_message, created_at, failed_at, metadata, tags)
  SELECT id, kind, queue, args, priority, attempt, max_attempts,
         error_count + 1, rescue_message, created_at, now(), metadata, tags
    FROM dead
  RETURNING original_job_id
)
SELECT id, kind, overdue, dead, message FROM retried
UNION ALL
SELECT d.id, d.kind, d.overdue, true, d.rescue_message
  FROM dead AS d JOIN buried AS b ON b.original_job_id = d.id
 ORDER BY 1
)sql";

constexpr const char* cleanup_sql = R"sql(
DELETE FROM jobs WHERE id IN (
  SELECT id FROM jobs
   WHERE state IN ('completed', 'cancelled')
     AND finalized_at < now() - make_interval(secs => $1::double precision)
   ORDER BY finalized_at
   LIMIT $2)
)sql";

} // namespace

std::string to_array_literal(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0)
      out += ',';
    out += std::to_string(ids[i]);
  }
  out += '}';
  return out;
}

namespace {
void delete_connection(pqxx::connection_base* conn) {
  delete static_cast<pqxx::connection*>(conn);
}
} // namespace

job_store::job_store(job_store_options opts)
  : opts_(std::move(opts)), conn_(nullptr, &delete_connection) {
  // nop
}

job_store::~job_store() = default;

void job_store::connect() {
  if (conn_)
    return;
  std::unique_ptr<pqxx::connection_base, connection_deleter> conn{
    new pqxx::connection(opts_.url), &delete_connection};
  conn->prepare("aw_claim", claim_sql);
  conn->prepare("aw_complete", complete_sql);
  conn->prepare("aw_complete_delete", complete_delete_sql);
  conn->prepare("aw_retry", retry_sql);
  conn->prepare("aw_dead_letter", dead_letter_sql);
  conn->prepare("aw_release", release_sql);
  conn->prepare("aw_cleanup", cleanup_sql);
  conn->prepare("aw_heartbeat", heartbeat_sql);
  conn->prepare("aw_rescue", rescue_sql);
  conn_ = std::move(conn);
}

void job_store::disconnect() noexcept {
  try {
    conn_.reset();
  } catch (...) {
    conn_.release(); // a destructor that throws leaves nothing to recover
  }
}

bool job_store::connected() const noexcept {
  return conn_ != nullptr;
}

pqxx::connection_base& job_store::connection() {
  connect();
  return *conn_;
}

std::vector<claimed_job> job_store::claim(const std::string& queue, int limit,
                                          int64_t default_deadline_ms) {
  connect();
  pqxx::work tx(*conn_, "aw_claim");
  auto rows = tx.exec_prepared("aw_claim", queue, opts_.worker_id, limit,
                               default_deadline_ms);
  tx.commit();
  std::vector<claimed_job> jobs;
  jobs.reserve(rows.size());
  for (const auto& row : rows) {
    claimed_job job;
    job.id = row[0].as<int64_t>();
    job.kind = row[1].as<std::string>();
    job.queue = row[2].as<std::string>();
    job.args = row[3].as<std::string>();
    job.priority = row[4].as<int32_t>();
    job.attempt = row[5].as<int32_t>();
    job.error_count = row[6].as<int32_t>();
    job.max_attempts = row[7].as<int32_t>();
    job.metadata = row[8].as<std::string>();
    job.deadline_ms = row[9].as<int64_t>();
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<finish_result>
job_store::finish(const std::vector<job_outcome>& outcomes) {
  connect();
  std::vector<finish_result> results(outcomes.size(), finish_result::stale);
  std::vector<int64_t> completed;
  for (const auto& o : outcomes)
    if (o.kind == outcome_kind::completed)
      completed.push_back(o.job_id);
  pqxx::work tx(*conn_, "aw_finish");
  std::vector<int64_t> applied;
  if (!completed.empty()) {
    auto rows = tx.exec_prepared(opts_.completed_retention.count() == 0
                                   ? "aw_complete_delete"
                                   : "aw_complete",
                                 to_array_literal(completed), opts_.worker_id);
    for (const auto& row : rows)
      applied.push_back(row[0].as<int64_t>());
  }
  for (const auto& o : outcomes) {
    if (o.kind == outcome_kind::completed)
      continue;
    bool done = false;
    if (o.kind == outcome_kind::retryable_failure
        || o.kind == outcome_kind::deadline_exceeded) {
      auto r = tx.exec_prepared("aw_retry", o.job_id, opts_.worker_id,
                                o.message, opts_.max_retries);
      done = !r.empty();
    }
    if (!done) {
      auto r = tx.exec_prepared("aw_dead_letter", o.job_id, opts_.worker_id,
                                o.message);
      done = !r.empty();
    }
    if (done)
      applied.push_back(o.job_id);
  }
  tx.commit();
  std::sort(applied.begin(), applied.end());
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (std::binary_search(applied.begin(), applied.end(), outcomes[i].job_id))
      results[i] = finish_result::applied;
  return results;
}

int64_t job_store::release(const std::vector<int64_t>& ids) {
  if (ids.empty())
    return 0;
  connect();
  pqxx::work tx(*conn_, "aw_release");
  auto rows = tx.exec_prepared("aw_release", to_array_literal(ids),
                               opts_.worker_id, defaults::notify_channel);
  tx.commit();
  return rows.empty() ? 0 : rows[0][0].as<int64_t>();
}

std::vector<int64_t> job_store::heartbeat(const std::vector<int64_t>& ids) {
  if (ids.empty())
    return {};
  connect();
  pqxx::work tx(*conn_, "aw_heartbeat");
  auto rows = tx.exec_prepared("aw_heartbeat", to_array_literal(ids),
                               opts_.worker_id);
  tx.commit();
  std::vector<int64_t> alive;
  alive.reserve(rows.size());
  for (const auto& row : rows)
    alive.push_back(row[0].as<int64_t>());
  return alive;
}

std::vector<rescued_job> job_store::rescue(int limit) {
  connect();
  double window = opts_.reclaim_window.count() / 1000.0;
  double grace = opts_.heartbeat_interval.count() / 1000.0;
  pqxx::work tx(*conn_, "aw_rescue");
  auto rows = tx.exec_prepared("aw_rescue", window, opts_.max_retries, limit,
                               grace);
  tx.commit();
  std::vector<rescued_job> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    rescued_job r;
    r.id = row[0].as<int64_t>();
    r.kind = row[1].as<std::string>();
    r.reason = row[2].as<bool>() ? rescue_reason::deadline_exceeded
                                 : rescue_reason::stale_heartbeat;
    r.dead_lettered = row[3].as<bool>();
    r.message = row[4].as<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

int64_t job_store::delete_expired(int batch) {
  connect();
  double seconds = opts_.completed_retention.count() / 1000.0;
  pqxx::work tx(*conn_, "aw_cleanup");
  auto result = tx.exec_prepared("aw_cleanup", seconds, batch);
  tx.commit();
  return result.affected_rows();
}

} // namespace aw::storage
