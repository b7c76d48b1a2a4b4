#include "actor_worker/storage/job_store.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/config/lease.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/messages/outcome.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/internal/job_store_parts.hpp"
#include "actor_worker/storage/queue_samples.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

namespace {

// -- the named queries ---------------------------------------------------------
// Each statement is a file in storage/sql/ (embedded at build time as
// sql::NAME), prepared once per connection under the name "aw_NAME".
// Statements that finalize a run of a row-per-state job check the row is
// still running under this worker *in that run* (`attempt`), so an outcome
// that arrives after the job was released, rescued or claimed again
// changes nothing. Lane jobs are guarded by their batch (see
// migrations/004_fast_lane.sql). Rows go out as JSON without the internal
// ready_xid column, as the `jobs` view shows them.

template <class T, class F>
std::string array_literal(const std::vector<T>& xs, F render) {
  std::string out = "{";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i > 0)
      out += ',';
    render(out, xs[i]);
  }
  out += '}';
  return out;
}

void delete_connection(pqxx::connection_base* conn) {
  delete static_cast<pqxx::connection*>(conn);
}

} // namespace

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

std::string to_array_literal(const std::vector<int64_t>& ids) {
  return array_literal(ids, [](std::string& out, int64_t x) {
    out += std::to_string(x);
  });
}

std::string to_array_literal(const std::vector<int32_t>& values) {
  return array_literal(values, [](std::string& out, int32_t x) {
    out += std::to_string(x);
  });
}

std::string to_array_literal(const std::vector<bool>& flags) {
  return array_literal(flags, [](std::string& out, bool x) {
    out += x ? 't' : 'f';
  });
}

std::string to_text_array_literal(const std::vector<std::string>& items) {
  return array_literal(items, [](std::string& out, const std::string& x) {
    out += '"';
    for (char c : x) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    out += '"';
  });
}

void job_store::observe(const std::vector<std::string>& kinds) {
  observed_kinds_ = to_text_array_literal(kinds);
  observed_.clear();
  observed_.insert(kinds.begin(), kinds.end());
}

void job_store::serve(const std::vector<std::string>& kinds) {
  served_kinds_ = to_text_array_literal(kinds);
}

job_store::job_store(job_store_options opts)
  : opts_(std::move(opts)), conn_(nullptr, &delete_connection) {
  // nop
}

job_store::~job_store() = default;

const std::unordered_map<std::string_view, const char*>& statements() {
  static const std::unordered_map<std::string_view, const char*> all = {
    {"aw_claim", sql::claim},
    {"aw_finish_and_claim", sql::finish_and_claim},
    {"aw_complete_lane", sql::complete_lane},
    {"aw_materialize", sql::materialize},
    {"aw_lane_completed_rows", sql::lane_completed_rows},
    {"aw_complete", sql::complete},
    {"aw_complete_delete", sql::complete_delete},
    {"aw_retry", sql::retry},
    {"aw_dead_letter", sql::dead_letter},
    {"aw_release", sql::release},
    {"aw_cleanup", sql::cleanup},
    {"aw_close_batches", sql::close_batches},
    {"aw_dead_tuples", sql::dead_tuples},
    {"aw_recycle", sql::recycle},
    {"aw_ring_period", sql::ring_period},
    {"aw_ring_lock_holders", sql::ring_lock_holders},
    {"aw_cleanup_dead_letters", sql::cleanup_dead_letters},
    {"aw_cleanup_cancel_requests", sql::cleanup_cancel_requests},
    {"aw_cleanup_starts", sql::cleanup_starts},
    {"aw_record_starts", sql::record_starts},
    {"aw_cancel_requests", sql::cancel_requests},
    {"aw_heartbeat", sql::heartbeat},
    {"aw_take_back_orphans", sql::take_back_orphans},
    {"aw_snooze", sql::snooze},
    {"aw_cancel", sql::cancel},
    {"aw_wait", sql::wait},
    {"aw_rescue", sql::rescue},
    {"aw_wait_times", sql::wait_times},
    {"aw_node_refresh", sql::node_refresh},
    {"aw_node_leave", sql::node_leave},
    {"aw_leader_resign", sql::leader_resign},
    {"aw_cleanup_nodes", sql::cleanup_nodes},
    {"aw_queue_samples", sql::queue_samples},
    {"aw_queue_controls_apply", sql::queue_controls_apply},
    {"aw_transactional_begin", sql::transactional_begin},
    {"aw_transactional_lease", sql::transactional_lease},
    {"aw_transactional_complete_lane", sql::transactional_complete_lane},
    {"aw_transactional_held", sql::transactional_held},
    {"aw_transactional_terminate", sql::transactional_terminate},
    {"aw_backend_start", sql::backend_start},
  };
  return all;
}

void job_store::connect() {
  if (conn_)
    return;
  std::unique_ptr<pqxx::connection_base, connection_deleter> conn{
    new pqxx::connection(opts_.url), &delete_connection};
  // Behind a transaction-mode pooler a session does not last past a
  // transaction: nothing is prepared, every statement travels with its
  // text (see run()).
  if (opts_.prepared_statements)
    for (const auto& [name, text] : statements())
      conn->prepare(std::string{name}, text);
  conn_ = std::move(conn);
  if (opts_.prepared_statements) {
    // A session of its own (no pooler): which server process it is, for
    // end_lost_backend() should it break.
    pqxx::nontransaction q(*conn_, "aw_backend_start");
    auto r = run(q, "aw_backend_start");
    if (!r.empty())
      backend_started_ = r[0]["started"].as<std::string>();
  }
}

void job_store::disconnect() noexcept {
  if (conn_ && !backend_started_.empty()) {
    lost_backend_pid_ = conn_->backendpid();
    lost_backend_started_ = backend_started_;
  }
  backend_started_.clear();
  try {
    conn_.reset();
  } catch (...) {
    conn_.release(); // a destructor that throws leaves nothing to recover
  }
}

pqxx::connection_base& job_store::connection() {
  connect();
  return *conn_;
}

namespace {

/// "priority 0, held by server pid 4711 (application worker-A, active,
/// transaction open for 12.5 s)", from a lane_busy entry of the claim's
/// note (actor_worker_lane_wait).
std::string describe_lane_holder(const nlohmann::json& b) {
  auto text = "priority " + std::to_string(b.value("priority", 0));
  auto pid = b.find("pid");
  if (pid == b.end() || !pid->is_number())
    return text + ", held by a session that let go as the wait ran out";
  text += ", held by server pid " + std::to_string(pid->get<int64_t>());
  std::vector<std::string> about;
  if (auto app = b.value("application_name", std::string{}); !app.empty())
    about.push_back("application " + app);
  if (auto state = b.value("state", std::string{}); !state.empty())
    about.push_back(state);
  if (auto x = b.find("xact_seconds"); x != b.end() && x->is_number())
    about.push_back("transaction open for " + x->dump() + " s");
  if (!about.empty()) {
    text += " (";
    for (size_t i = 0; i < about.size(); ++i)
      text += (i ? ", " : "") + about[i];
    text += ")";
  }
  return text;
}

/// Reads the claim rows (storage/sql/claim.sql:claim) into `out`: jobs, then
/// note rows (lease NULL) whose JSON says what else the worker should know;
/// a note's "done" (claim.sql:finish_and_claim) lists the completions recorded.
void parse_claim_rows(const pqxx::result& rows, const std::string& queue,
                      int64_t default_deadline_ms, claim_result& out,
                      std::vector<int64_t>* done) {
  if (rows.empty())
    return;
  // Columns by name, looked up once per result rather than once per field.
  auto lease = rows.column_number("lease");
  auto id = rows.column_number("id");
  auto kind = rows.column_number("kind");
  auto args = rows.column_number("args");
  auto priority = rows.column_number("priority");
  auto attempt = rows.column_number("attempt");
  auto error_count = rows.column_number("error_count");
  auto max_attempts = rows.column_number("max_attempts");
  auto metadata = rows.column_number("metadata");
  auto deadline_ms = rows.column_number("deadline_ms");
  auto event_row = rows.column_number("event_row");
  auto note = rows.column_number("note");
  out.jobs.reserve(out.jobs.size() + rows.size());
  for (const auto& row : rows) {
    if (row[lease].is_null()) {
      auto n = nlohmann::json::parse(row[note].as<std::string>("{}"));
      if (n.value("paused", false))
        out.paused = true;
      if (n.value("byte_bound", false))
        out.byte_bound = true;
      if (n.value("limited", false)) {
        out.limited = true;
        auto retry = n.find("retry_after_ms");
        out.retry_after_ms = retry != n.end() && retry->is_number()
                               ? retry->get<int64_t>()
                               : -1;
      }
      if (auto aside = n.find("set_aside"); aside != n.end())
        for (auto& s : *aside)
          out.set_aside.push_back({s.value("kind", std::string{}),
                                   s.value("priority", 0),
                                   s.value("count", int64_t{0})});
      if (auto busy = n.find("lane_busy"); busy != n.end())
        for (auto& b : *busy)
          out.blocked_by.push_back(describe_lane_holder(b));
      if (auto ids = n.find("done"); ids != n.end() && done != nullptr)
        for (auto& x : *ids)
          done->push_back(x.get<int64_t>());
      continue;
    }
    claimed_job job;
    job.lease = row[lease].as<int64_t>();
    job.id = row[id].as<int64_t>();
    job.kind = row[kind].as<std::string>();
    job.queue = queue;
    job.args = row[args].as<std::string>();
    job.priority = row[priority].as<int32_t>();
    job.attempt = row[attempt].as<int32_t>();
    job.error_count = row[error_count].as<int32_t>();
    job.max_attempts = row[max_attempts].as<int32_t>();
    job.metadata = row[metadata].as<std::string>();
    job.deadline_ms = row[deadline_ms].as<int64_t>();
    if (job.deadline_ms == 0)
      job.deadline_ms = default_deadline_ms;
    if (!row[event_row].is_null())
      job.started_row = row[event_row].as<std::string>();
    out.jobs.push_back(std::move(job));
  }
}

/// How long a claim waits for a lane's claim lock before it skips the lane.
int64_t lane_wait_ms() {
  return defaults::claim_lock_wait.count();
}

} // namespace

bool lane_completions_only(const std::vector<job_outcome>& outcomes) {
  for (auto& o : outcomes)
    if (!on_lane(o.lease) || o.kind != outcome_kind::completed || o.observed)
      return false;
  return true;
}

claim_result job_store::claim(const std::string& queue, int limit,
                              int64_t max_bytes, int64_t default_deadline_ms) {
  connect();
  // One statement in autocommit: no BEGIN/COMMIT round trips.
  pqxx::nontransaction tx(*conn_, "aw_claim");
  claim_result out;
  parse_claim_rows(run(tx, "aw_claim", queue, opts_.worker_id, limit,
                       max_bytes, served_kinds_, observed_kinds_,
                       lane_wait_ms()),
                   queue, default_deadline_ms, out, nullptr);
  return out;
}

std::pair<std::vector<finish_report>, claim_result>
job_store::finish_and_claim(const std::vector<job_outcome>& outcomes,
                            const std::string& queue, int limit,
                            int64_t max_bytes, int64_t default_deadline_ms,
                            bool in_doubt) {
  if (!lane_completions_only(outcomes)) {
    auto reports = finish(outcomes, in_doubt);
    return {std::move(reports),
            claim(queue, limit, max_bytes, default_deadline_ms)};
  }
  if (in_doubt)
    end_lost_backend();
  connect();
  std::vector<int64_t> jobs;
  std::vector<int64_t> leases;
  jobs.reserve(outcomes.size());
  leases.reserve(outcomes.size());
  for (auto& o : outcomes) {
    jobs.push_back(o.job_id);
    leases.push_back(o.lease);
  }
  claim_result claimed;
  std::vector<int64_t> done;
  {
    pqxx::nontransaction tx(*conn_, "aw_finish_and_claim");
    parse_claim_rows(run(tx, "aw_finish_and_claim", opts_.worker_id,
                         to_array_literal(leases), to_array_literal(jobs),
                         queue, limit, max_bytes, served_kinds_,
                         observed_kinds_,
                         opts_.completed_retention.count() == 0,
                         lane_wait_ms()),
                     queue, default_deadline_ms, claimed, &done);
  }
  std::sort(done.begin(), done.end());
  std::vector<finish_report> reports(outcomes.size());
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (std::binary_search(done.begin(), done.end(), outcomes[i].job_id))
      reports[i].result = finish_result::applied;
  return {std::move(reports), std::move(claimed)};
}

void job_store::end_backend(int pid, const std::string& started) {
  for (int i = 0; i < 200 && pid != 0 && !started.empty(); ++i) {
    pqxx::nontransaction q(*conn_, "aw_transactional_terminate");
    if (run(q, "aw_transactional_terminate", pid, started).empty())
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
}

void job_store::end_lost_backend() {
  if (lost_backend_pid_ == 0)
    return;
  connect();
  end_backend(lost_backend_pid_, lost_backend_started_);
  lost_backend_pid_ = 0;
  lost_backend_started_.clear();
}

std::optional<std::string>
job_store::register_callback(int64_t job_id, int64_t lease,
                             std::chrono::milliseconds timeout) {
  connect();
  pqxx::work tx(*conn_, "aw_register_callback");
  auto id = register_running_callback(tx, opts_.worker_id, job_id, lease,
                                      timeout);
  tx.commit();
  return id;
}

std::optional<bool>
job_store::still_held_after_lost_commit(const job_outcome& job, int pid,
                                        const std::string& started,
                                        const cancellation_token& cancel) {
  auto backoff = std::chrono::milliseconds{50};
  for (;;) {
    try {
      connect();
      // The server process that got the COMMIT goes first (it may still be
      // committing), waited for up to 10 s.
      end_backend(pid, started);
      pqxx::nontransaction q(*conn_, "aw_transactional_held");
      auto r = run(q, "aw_transactional_held", opts_.worker_id, job.job_id,
                   job.lease);
      return r[0][0].as<bool>();
    } catch (const pqxx::broken_connection&) {
      disconnect();
    } catch (const pqxx::in_doubt_error&) {
      disconnect();
    } catch (const pqxx::sql_error&) {
      // A server that is starting up, a standby not yet promoted: wait.
      disconnect();
    }
    if (!cancel.sleep_for(backoff))
      return std::nullopt;
    backoff = std::min(backoff * 2, std::chrono::milliseconds{2000});
  }
}

int64_t job_store::release(const std::vector<held_job>& jobs, bool started) {
  if (jobs.empty())
    return 0;
  connect();
  std::vector<int64_t> ids;
  std::vector<int64_t> leases;
  for (auto& j : jobs) {
    ids.push_back(j.id);
    leases.push_back(j.lease);
  }
  pqxx::work tx(*conn_, "aw_release");
  auto r = run(tx, "aw_release", opts_.worker_id, to_array_literal(leases),
               to_array_literal(ids), started);
  tx.commit();
  return r.empty() ? 0 : r[0]["released"].as<int64_t>();
}

void job_store::record_starts(const std::vector<held_job>& jobs) {
  if (jobs.empty())
    return;
  connect();
  std::vector<int64_t> ids;
  std::vector<int64_t> leases;
  ids.reserve(jobs.size());
  leases.reserve(jobs.size());
  for (auto& j : jobs) {
    ids.push_back(j.id);
    leases.push_back(j.lease);
  }
  pqxx::nontransaction tx(*conn_, "aw_record_starts");
  run(tx, "aw_record_starts", to_array_literal(leases), to_array_literal(ids));
}

int64_t job_store::release(const std::vector<claimed_job>& jobs,
                           bool started) {
  std::vector<held_job> held;
  held.reserve(jobs.size());
  for (auto& j : jobs)
    held.push_back({j.id, j.lease, 0});
  return release(held, started);
}

std::vector<int64_t> job_store::heartbeat(const std::vector<int64_t>& leases) {
  std::vector<int64_t> out;
  connect();
  pqxx::nontransaction tx(*conn_, "aw_heartbeat");
  if (!leases.empty())
    for (const auto& row :
         run(tx, "aw_heartbeat", to_array_literal(leases), opts_.worker_id))
      out.push_back(row["id"].as<int64_t>());
  // Claims this worker made but does not hold (in doubt when they
  // committed), older than the reclaim window: a claim's reply reaches
  // its poller long before, so none in flight is taken.
  run(tx, "aw_take_back_orphans", opts_.worker_id, to_array_literal(leases),
      fractional_seconds(opts_.reclaim_window));
  return out;
}

std::vector<rescued_job> job_store::rescue(int limit) {
  connect();
  double window = fractional_seconds(opts_.reclaim_window);
  pqxx::work tx(*conn_, "aw_rescue");
  auto rows = run(tx, "aw_rescue", window, opts_.max_retries, limit);
  tx.commit();
  std::vector<rescued_job> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    rescued_job r;
    r.id = row["id"].as<int64_t>();
    r.kind = row["kind"].as<std::string>();
    r.queue = row["queue"].as<std::string>();
    auto reason = row["reason"].as<std::string>();
    r.reason = reason == "expired_callback" ? rescue_reason::expired_callback
                                            : rescue_reason::stale_heartbeat;
    r.dead_lettered = row["dead"].as<bool>();
    r.message = row["message"].as<std::string>();
    r.job_json = row["row"].as<std::string>(std::string{});
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

} // namespace aw::storage
