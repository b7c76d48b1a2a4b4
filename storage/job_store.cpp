#include "storage/job_store.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <nlohmann/json.hpp>
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
     -- A job with an ordering key waits for every earlier unfinished job of
     -- its key (an earlier one being claimed right now is still 'available'
     -- in this snapshot, so two of a key are never claimed together).
     AND (ordering_key IS NULL OR NOT EXISTS (
           SELECT 1 FROM jobs AS o
            WHERE o.ordering_key = jobs.ordering_key AND o.id < jobs.id
              AND o.state IN ('scheduled', 'available', 'running',
                              'waiting_external')))
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
            coalesce(j.deadline_ms, $4) AS deadline_ms,
            CASE WHEN j.kind = ANY($5::text[]) THEN to_jsonb(j)::text END AS row
)
SELECT id, kind, queue, args, priority, attempt, error_count, max_attempts,
       metadata, deadline_ms, row
  FROM claimed ORDER BY priority, run_at, id
)sql";

// Completions are one statement per batch. `(state = 'running') IS TRUE`
// is `state = 'running'` that the planner cannot match to the partial
// running-jobs index: a batch must look its ids up by primary key, not scan
// every running row of the worker and test each against the array (3x
// slower at 500 running jobs, measured). The committed row comes back
// only for kinds with hooks or follow-ups ($3), so the hot path of kinds
// nobody observes ships no JSON.
// A finished job with an ordering key unblocks the next job of its key:
// wake that queue's pollers rather than leave the next one to the idle poll.
constexpr const char* complete_sql = R"sql(
WITH done AS (
  UPDATE jobs AS j SET state = 'completed', finalized_at = now(),
                       deadline_at = NULL
   WHERE id = ANY($1::bigint[]) AND (state = 'running') IS TRUE
     AND locked_by = $2
  RETURNING id, queue, ordering_key,
            CASE WHEN kind = ANY($3::text[]) THEN to_jsonb(j)::text END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) FROM done
)sql";

constexpr const char* complete_delete_sql = R"sql(
WITH done AS (
  DELETE FROM jobs AS j
   WHERE id = ANY($1::bigint[]) AND (state = 'running') IS TRUE
     AND locked_by = $2
  RETURNING id, queue, ordering_key,
            CASE WHEN kind = ANY($3::text[])
                 THEN (to_jsonb(j) || jsonb_build_object(
                         'state', 'completed', 'finalized_at', now(),
                         'deadline_at', NULL))::text END AS row
), woken AS (
  SELECT pg_notify($4, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE ordering_key IS NOT NULL) AS q
)
SELECT id, row, (SELECT count(*) FROM woken) FROM done
)sql";

// Reschedules after $5 ms, or (when $5 is NULL) after the backoff
// 2^(error_count + 1) s, unless this failure was the job's last allowed
// attempt; the exponent is capped only to keep the interval representable.
constexpr const char* retry_sql = R"sql(
UPDATE jobs AS j
   SET state = 'scheduled', error_count = error_count + 1,
       last_error_message = $3, last_failed_at = now(),
       run_at = now() + coalesce($5::bigint * interval '1 millisecond',
                                 make_interval(secs => power(2, least(error_count + 1, 40)))),
       locked_by = NULL, locked_at = NULL, deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2
   AND error_count + 1 < coalesce(max_attempts, $4::integer + 1)
RETURNING to_jsonb(j)::text
)sql";

constexpr const char* dead_letter_sql = R"sql(
WITH moved AS (
  DELETE FROM jobs WHERE id = $1 AND state = 'running' AND locked_by = $2
  RETURNING *
)
INSERT INTO dead_letter_jobs AS d
  (original_job_id, kind, queue, args, priority, attempt, max_attempts,
   error_count, last_error_message, created_at, failed_at, metadata, tags)
SELECT id, kind, queue, args, priority, attempt, max_attempts,
       error_count + 1, $3, created_at, now(), metadata, tags
  FROM moved
RETURNING to_jsonb(d)::text,
          (SELECT count(*) FROM moved AS m,
                  LATERAL (SELECT pg_notify($4, m.queue)) AS n
            WHERE m.ordering_key IS NOT NULL)
)sql";

constexpr const char* snooze_sql = R"sql(
UPDATE jobs AS j
   SET state = 'scheduled', run_at = now() + $3::bigint * interval '1 millisecond',
       locked_by = NULL, locked_at = NULL, deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2
RETURNING to_jsonb(j)::text
)sql";

constexpr const char* cancel_sql = R"sql(
UPDATE jobs AS j
   SET state = 'cancelled', finalized_at = now(), last_error_message = $3,
       deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2
RETURNING to_jsonb(j)::text,
          CASE WHEN ordering_key IS NOT NULL
               THEN pg_notify($4, queue) END
)sql";

// The callback id comes from gen_random_uuid(): 122 random bits from a
// cryptographic source, so nobody can guess a waiting job's id.
constexpr const char* wait_sql = R"sql(
UPDATE jobs AS j
   SET state = 'waiting_external', callback_id = gen_random_uuid(),
       callback_timeout_at = now() + $3::bigint * interval '1 millisecond',
       callback_result = NULL, locked_by = NULL, locked_at = NULL,
       deadline_at = NULL
 WHERE id = $1 AND state = 'running' AND locked_by = $2
RETURNING to_jsonb(j)::text
)sql";

constexpr const char* release_sql = R"sql(
WITH released AS (
  UPDATE jobs SET state = 'available', locked_by = NULL, locked_at = NULL,
                  deadline_at = NULL
   WHERE id = ANY($1::bigint[]) AND (state = 'running') IS TRUE
     AND locked_by = $2
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
// owner gets the grace to cancel the run itself), and of waiting jobs whose
// callback timed out. Each is charged a failed attempt and rescheduled with
// the usual backoff, or dead-lettered when it was its last. SKIP LOCKED
// makes it safe on every node at once.
constexpr const char* rescue_sql = R"sql(
WITH stale AS (
  SELECT id, r.reason,
         CASE r.reason
           WHEN 'expired_callback'
           THEN 'callback expired: no callback for ' || coalesce(callback_id::text, '?')
                || ' by ' || callback_timeout_at
           WHEN 'deadline_exceeded'
           THEN 'deadline exceeded: the run on ' || coalesce(locked_by, '?')
                || ' passed its deadline (' || deadline_at || ') and was not ended'
           ELSE 'lease expired: worker ' || coalesce(locked_by, '?')
                || ' stopped heartbeating (last heartbeat at ' || locked_at || ')'
         END AS message
    FROM jobs,
         LATERAL (SELECT CASE
           WHEN state = 'waiting_external' THEN 'expired_callback'
           WHEN deadline_at < now() - make_interval(secs => $4::double precision)
           THEN 'deadline_exceeded'
           ELSE 'stale_heartbeat' END AS reason) AS r
   WHERE (state = 'running'
          AND (locked_at < now() - make_interval(secs => $1::double precision)
               OR deadline_at < now() - make_interval(secs => $4::double precision)))
      OR (state = 'waiting_external' AND callback_timeout_at < now())
   ORDER BY id
   LIMIT $3
   FOR UPDATE OF jobs SKIP LOCKED
), retried AS (
  UPDATE jobs AS j
     SET state = 'scheduled', error_count = j.error_count + 1,
         last_error_message = stale.message, last_failed_at = now(),
         run_at = now() + make_interval(secs => power(2, least(j.error_count + 1, 40))),
         locked_by = NULL, locked_at = NULL, deadline_at = NULL
    FROM stale
   WHERE j.id = stale.id
     AND j.error_count + 1 < coalesce(j.max_attempts, $2::integer + 1)
  RETURNING j.id, j.kind, stale.reason, false AS dead, stale.message,
            to_jsonb(j)::text AS row
), dead AS (
  DELETE FROM jobs AS j USING stale
   WHERE j.id = stale.id
     AND j.error_count + 1 >= coalesce(j.max_attempts, $2::integer + 1)
  RETURNING j.*, stale.reason AS rescue_reason, stale.message AS rescue_message
), buried AS (
  INSERT INTO dead_letter_jobs AS b
    (original_job_id, kind, queue, args, priority, attempt, max_attempts,
     error_count, last_error_message, created_at, failed_at, metadata, tags)
  SELECT id, kind, queue, args, priority, attempt, max_attempts,
         error_count + 1, rescue_message, created_at, now(), metadata, tags
    FROM dead
  RETURNING b.original_job_id, to_jsonb(b)::text AS row
)
SELECT id, kind, reason, dead, message, row FROM retried
UNION ALL
SELECT d.id, d.kind, d.rescue_reason, true, d.rescue_message, b.row
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

/// The follow-ups of one committed transition. A callable that throws
/// (anything) is reported as an error naming the trigger's kind, event and
/// job, so the failure recorded instead of the outcome says which
/// follow-up failed; a non-standard exception must not escape into the
/// storage actor either.
std::vector<enqueue_request> follow_ups_of(const follow_up_function& fn,
                                           const job_event& e) {
  auto fail = [&](const std::string& why) {
    auto job = nlohmann::json::parse(e.job_json, nullptr, false);
    std::string kind = e.kind;
    int64_t id = 0;
    if (job.is_object()) {
      if (kind.empty())
        kind = job.value("kind", std::string{"?"});
      id = job.value(job.contains("original_job_id") ? "original_job_id" : "id",
                     int64_t{0});
    }
    return std::runtime_error("a follow-up of job kind '" + kind + "' (on "
                              + to_string(e.type) + " of job "
                              + std::to_string(id) + ") failed: " + why);
  };
  try {
    return fn(e);
  } catch (const std::exception& ex) {
    throw fail(ex.what());
  } catch (...) {
    throw fail("it threw a non-standard exception");
  }
}

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

std::string to_text_array_literal(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

void job_store::observe(const std::vector<std::string>& kinds) {
  observed_kinds_ = to_text_array_literal(kinds);
}

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
  conn->prepare("aw_snooze", snooze_sql);
  conn->prepare("aw_cancel", cancel_sql);
  conn->prepare("aw_wait", wait_sql);
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
                                          int64_t default_deadline_ms,
                                          std::vector<job_event>* started) {
  connect();
  pqxx::work tx(*conn_, "aw_claim");
  auto rows = tx.exec_prepared("aw_claim", queue, opts_.worker_id, limit,
                               default_deadline_ms, observed_kinds_);
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
    if (started != nullptr && !row[10].is_null()) {
      job_event e;
      e.type = event_type::started;
      e.kind = job.kind;
      e.job_json = row[10].as<std::string>();
      started->push_back(std::move(e));
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<finish_report>
job_store::finish(const std::vector<job_outcome>& outcomes) {
  connect();
  std::vector<finish_report> reports(outcomes.size());
  std::vector<int64_t> completed;
  for (const auto& o : outcomes)
    if (o.kind == outcome_kind::completed)
      completed.push_back(o.job_id);
  pqxx::work tx(*conn_, "aw_finish");
  auto fire = [&](size_t i, event_type type, std::string json) {
    reports[i].result = finish_result::applied;
    job_event e;
    e.type = type;
    e.job_json = std::move(json);
    e.duration_ms = outcomes[i].duration_ms;
    e.message = outcomes[i].message;
    reports[i].event = e;
    reports[i].has_event = true;
  };
  if (!completed.empty()) {
    auto rows = tx.exec_prepared(opts_.completed_retention.count() == 0
                                   ? "aw_complete_delete"
                                   : "aw_complete",
                                 to_array_literal(completed), opts_.worker_id,
                                 observed_kinds_, defaults::notify_channel);
    std::unordered_map<int64_t, std::string> applied;
    for (const auto& row : rows)
      applied.emplace(row[0].as<int64_t>(),
                      row[1].is_null() ? std::string{} : row[1].as<std::string>());
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i].kind != outcome_kind::completed)
        continue;
      auto a = applied.find(outcomes[i].job_id);
      if (a == applied.end())
        continue;
      fire(i, event_type::completed, std::move(a->second));
      // Without observers nobody needs the event: keep the hot path lean.
      reports[i].has_event = !reports[i].event.job_json.empty();
    }
  }
  auto single = [&](const char* stmt, auto&&... args) -> std::optional<std::string> {
    auto r = tx.exec_prepared(stmt, std::forward<decltype(args)>(args)...);
    if (r.empty())
      return std::nullopt;
    return r[0][0].template as<std::string>();
  };
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    const auto& me = opts_.worker_id;
    switch (o.kind) {
      case outcome_kind::completed:
        break;
      case outcome_kind::retryable_failure:
      case outcome_kind::deadline_exceeded:
      case outcome_kind::retry_after: {
        std::optional<int64_t> delay;
        if (o.kind == outcome_kind::retry_after)
          delay = o.delay_ms;
        if (auto row = single("aw_retry", o.job_id, me, o.message,
                              opts_.max_retries, delay)) {
          fire(i, event_type::retried, std::move(*row));
          break;
        }
        if (auto row = single("aw_dead_letter", o.job_id, me, o.message,
                              defaults::notify_channel))
          fire(i, event_type::exhausted, std::move(*row));
        break;
      }
      case outcome_kind::terminal_failure:
        if (auto row = single("aw_dead_letter", o.job_id, me, o.message,
                              defaults::notify_channel))
          fire(i, event_type::exhausted, std::move(*row));
        break;
      case outcome_kind::snoozed:
        if (single("aw_snooze", o.job_id, me, o.delay_ms)) {
          reports[i].result = finish_result::applied; // snoozes fire nothing
        }
        break;
      case outcome_kind::cancelled:
        if (auto row = single("aw_cancel", o.job_id, me, o.message,
                              defaults::notify_channel))
          fire(i, event_type::cancelled, std::move(*row));
        break;
      case outcome_kind::waiting_callback:
        if (auto row = single("aw_wait", o.job_id, me, o.delay_ms))
          fire(i, event_type::waiting_for_callback, std::move(*row));
        break;
    }
  }
  // Durable follow-ups: inserted in this transaction, so they commit with
  // the transitions that trigger them, or not at all.
  if (follow_ups_) {
    std::vector<enqueue_request> requests;
    for (auto& r : reports)
      if (r.has_event && !r.event.job_json.empty()) {
        auto more = follow_ups_of(follow_ups_, r.event);
        std::move(more.begin(), more.end(), std::back_inserter(requests));
      }
    if (!requests.empty())
      enqueue_many(tx, requests);
  }
  tx.commit();
  return reports;
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
    auto reason = row[2].as<std::string>();
    r.reason = reason == "expired_callback"    ? rescue_reason::expired_callback
               : reason == "deadline_exceeded" ? rescue_reason::deadline_exceeded
                                               : rescue_reason::stale_heartbeat;
    r.dead_lettered = row[3].as<bool>();
    r.message = row[4].as<std::string>();
    r.job_json = row[5].as<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

void job_store::enqueue_follow_ups(const std::vector<job_event>& events) {
  if (!follow_ups_ || events.empty())
    return;
  std::vector<enqueue_request> requests;
  for (auto& e : events) {
    auto more = follow_ups_of(follow_ups_, e);
    std::move(more.begin(), more.end(), std::back_inserter(requests));
  }
  if (requests.empty())
    return;
  connect();
  pqxx::work tx(*conn_, "aw_follow_ups");
  enqueue_many(tx, requests);
  tx.commit();
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
