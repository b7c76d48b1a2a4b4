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

/// Builds the event of a committed transition.
job_event transition_event(event_type type, std::string json,
                     const job_outcome& o) {
  job_event e;
  e.type = type;
  e.job_json = std::move(json);
  e.duration_ms = o.duration_ms;
  e.message = o.message;
  return e;
}

} // namespace

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

namespace {

/// The runtime's statements by name: prepared on each connection, or sent
/// as text with their parameters (unnamed) behind a pooler.
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
    {"aw_transactional_limits", sql::transactional_limits},
    {"aw_transactional_lease", sql::transactional_lease},
    {"aw_transactional_lane_lease", sql::transactional_lane_lease},
    {"aw_transactional_held", sql::transactional_held},
    {"aw_transactional_terminate", sql::transactional_terminate},
    {"aw_backend_start", sql::backend_start},
  };
  return all;
}

} // namespace

template <class... Args>
pqxx::result job_store::run(pqxx::transaction_base& tx, const char* name,
                            Args&&... args) {
  if (opts_.prepared_statements)
    return tx.exec_prepared(name, std::forward<Args>(args)...);
  return tx.exec_params(statements().at(name), std::forward<Args>(args)...);
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

/// A lease names a lane batch when its lowest bit is set
/// (actor_worker_batch_id), a row batch otherwise.
bool on_lane(int64_t lease) {
  return (lease & 1) != 0;
}

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

/// True when `outcomes` are all completions of lane jobs nobody observes:
/// receipts alone, no events, no follow-ups.
bool lane_completions_only(const std::vector<job_outcome>& outcomes) {
  for (auto& o : outcomes)
    if (!on_lane(o.lease) || o.kind != outcome_kind::completed || o.observed)
      return false;
  return true;
}

} // namespace

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

std::vector<finish_report>
job_store::finish(const std::vector<job_outcome>& outcomes, bool in_doubt,
                  failure_follow_ups failures) {
  // A lane completion recorded twice counts once (an outcome records only
  // jobs no receipt of their batch holds yet), and any other outcome finds
  // its lease no longer running the job: once the server process that may
  // still be committing them is gone, the same statements are right.
  if (in_doubt)
    end_lost_backend();
  connect();
  if (lane_completions_only(outcomes)) {
    // The hot path: one statement in autocommit.
    pqxx::nontransaction tx(*conn_, "aw_finish");
    return finish_in(tx, outcomes, failures);
  }
  pqxx::work tx(*conn_, "aw_finish");
  auto reports = finish_in(tx, outcomes, failures);
  tx.commit();
  return reports;
}

namespace {

/// `report` says the outcome applied, with event `type` of committed row
/// `json`.
void fire(finish_report& report, event_type type, std::string json,
          const job_outcome& o) {
  report.result = finish_result::applied;
  report.event = transition_event(type, std::move(json), o);
  report.has_event = true;
}

bool has_id(const std::vector<int64_t>& sorted_ids, int64_t id) {
  return std::binary_search(sorted_ids.begin(), sorted_ids.end(), id);
}

} // namespace

std::vector<finish_report>
job_store::finish_in(pqxx::transaction_base& tx,
                     const std::vector<job_outcome>& outcomes,
                     failure_follow_ups failures) {
  std::vector<finish_report> reports(outcomes.size());
  auto materialized = finish_lane_jobs(tx, outcomes, reports);
  complete_row_jobs(tx, outcomes, reports);
  record_other_outcomes(tx, outcomes, materialized, reports);
  insert_follow_ups(tx, reports, failures);
  return reports;
}

std::vector<int64_t>
job_store::finish_lane_jobs(pqxx::transaction_base& tx,
                            const std::vector<job_outcome>& outcomes,
                            std::vector<finish_report>& reports) {
  // Completions become receipts; any other outcome first turns its job
  // into a running row of its batch, for record_other_outcomes. A lane
  // outcome whose batch is no longer ours is stale.
  const auto& me = opts_.worker_id;
  bool deleting = opts_.completed_retention.count() == 0;
  std::vector<int64_t> done_jobs, done_leases, other_jobs, other_leases;
  std::vector<int64_t> observed_done;
  for (auto& o : outcomes) {
    if (!on_lane(o.lease))
      continue;
    if (o.kind == outcome_kind::completed) {
      done_jobs.push_back(o.job_id);
      done_leases.push_back(o.lease);
      if (o.observed)
        observed_done.push_back(o.job_id);
    } else {
      other_jobs.push_back(o.job_id);
      other_leases.push_back(o.lease);
    }
  }
  std::vector<int64_t> recorded, materialized;
  if (!done_jobs.empty())
    for (const auto& row : run(tx, "aw_complete_lane", me,
                               to_array_literal(done_leases),
                               to_array_literal(done_jobs), deleting))
      recorded.push_back(row[0].as<int64_t>());
  if (!other_jobs.empty())
    for (const auto& row : run(tx, "aw_materialize", me,
                               to_array_literal(other_leases),
                               to_array_literal(other_jobs)))
      materialized.push_back(row[0].as<int64_t>());
  std::sort(recorded.begin(), recorded.end());
  std::sort(materialized.begin(), materialized.end());
  std::unordered_map<int64_t, std::string> lane_rows;
  if (!observed_done.empty())
    for (const auto& row :
         run(tx, "aw_lane_completed_rows", to_array_literal(observed_done)))
      lane_rows.emplace(row["id"].as<int64_t>(),
                        row["row_json"].as<std::string>());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    auto& o = outcomes[i];
    if (!on_lane(o.lease) || o.kind != outcome_kind::completed
        || !has_id(recorded, o.job_id))
      continue;
    reports[i].result = finish_result::applied;
    if (auto r = lane_rows.find(o.job_id); r != lane_rows.end())
      fire(reports[i], event_type::completed, std::move(r->second), o);
  }
  return materialized;
}

void job_store::complete_row_jobs(pqxx::transaction_base& tx,
                                  const std::vector<job_outcome>& outcomes,
                                  std::vector<finish_report>& reports) {
  // Each guarded by its lease: still running in that batch.
  std::vector<int64_t> completed, completed_leases;
  for (auto& o : outcomes)
    if (!on_lane(o.lease) && o.kind == outcome_kind::completed) {
      completed.push_back(o.job_id);
      completed_leases.push_back(o.lease);
    }
  if (completed.empty())
    return;
  bool deleting = opts_.completed_retention.count() == 0;
  auto rows = run(tx, deleting ? "aw_complete_delete" : "aw_complete",
                  to_array_literal(completed), opts_.worker_id, observed_kinds_,
                  defaults::notify_channel, to_array_literal(completed_leases));
  std::unordered_map<int64_t, std::string> applied;
  for (const auto& row : rows)
    applied.emplace(row["id"].as<int64_t>(),
                    row["row"].is_null() ? std::string{}
                                         : row["row"].as<std::string>());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    auto& o = outcomes[i];
    if (on_lane(o.lease) || o.kind != outcome_kind::completed)
      continue;
    auto a = applied.find(o.job_id);
    if (a == applied.end())
      continue;
    reports[i].result = finish_result::applied;
    // Without observers nobody needs the event: keep the hot path lean.
    if (!a->second.empty())
      fire(reports[i], event_type::completed, std::move(a->second), o);
  }
}

void job_store::record_other_outcomes(pqxx::transaction_base& tx,
                                      const std::vector<job_outcome>& outcomes,
                                      const std::vector<int64_t>& materialized,
                                      std::vector<finish_report>& reports) {
  // Row-claimed jobs and the lane jobs finish_lane_jobs materialized, each
  // guarded by its lease.
  auto single = [&](const char* stmt, auto&&... args) -> std::optional<std::string> {
    auto r = run(tx, stmt, std::forward<decltype(args)>(args)...);
    if (r.empty() || r[0]["row_json"].is_null())
      return std::nullopt;
    return r[0]["row_json"].template as<std::string>();
  };
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    auto& report = reports[i];
    if (o.kind == outcome_kind::completed)
      continue;
    if (on_lane(o.lease) && !has_id(materialized, o.job_id))
      continue; // a stale lane outcome
    switch (o.kind) {
      case outcome_kind::completed:
        break;
      case outcome_kind::retryable_failure:
      case outcome_kind::deadline_exceeded:
      case outcome_kind::retry_after:
      case outcome_kind::abandoned: {
        std::optional<int64_t> delay;
        if (o.kind == outcome_kind::retry_after)
          delay = o.delay_ms;
        // A deadline overrun is a rescue (the lifecycle spec's Rescued,
        // reason deadline_exceeded), whether the handler ended on its
        // cancellation or was given up.
        bool rescue = o.kind == outcome_kind::abandoned
                      || o.kind == outcome_kind::deadline_exceeded;
        if (auto row = single("aw_retry", o.job_id, o.lease, o.message,
                              opts_.max_retries, delay)) {
          fire(report, rescue ? event_type::rescued : event_type::retried,
               std::move(*row), o);
        } else if (auto row = single("aw_dead_letter", o.job_id, o.lease,
                                     o.message, defaults::notify_channel)) {
          fire(report, rescue ? event_type::rescued : event_type::exhausted,
               std::move(*row), o);
        }
        if (rescue && report.has_event)
          report.event.reason = rescue_reason::deadline_exceeded;
        break;
      }
      case outcome_kind::terminal_failure:
        if (auto row = single("aw_dead_letter", o.job_id, o.lease, o.message,
                              defaults::notify_channel))
          fire(report, event_type::exhausted, std::move(*row), o);
        break;
      case outcome_kind::snoozed:
        if (single("aw_snooze", o.job_id, o.lease, o.delay_ms))
          report.result = finish_result::applied; // snoozes fire nothing
        break;
      case outcome_kind::cancelled:
        if (auto row = single("aw_cancel", o.job_id, o.lease, o.message,
                              defaults::notify_channel))
          fire(report, event_type::cancelled, std::move(*row), o);
        break;
      case outcome_kind::waiting_callback:
        park(tx, o, report);
        break;
    }
  }
}

void job_store::park(pqxx::transaction_base& tx, const job_outcome& o,
                     finish_report& report) {
  auto r = run(tx, "aw_wait", o.job_id, o.lease, o.delay_ms);
  if (r.empty())
    return;
  fire(report, event_type::waiting_for_callback,
       r[0]["row_json"].as<std::string>(), o);
  // A resolution that came while the job ran (it registered its id) is
  // applied now: the park and it commit together.
  if (r[0]["early"].is_null())
    return;
  auto kept = parse_kept_resolution(r[0]["early"].as<std::string>());
  auto applied = apply_callback(tx, r[0]["callback_id"].as<std::string>(),
                                kept.action, kept.payload, kept.error);
  if (applied.has_event) {
    report.has_resolution = true;
    report.resolution = std::move(applied.event);
  }
}

void job_store::insert_follow_ups(pqxx::transaction_base& tx,
                                  const std::vector<finish_report>& reports,
                                  failure_follow_ups failures) {
  // Durable follow-ups: inserted in this transaction, so they commit with
  // the transitions that trigger them, or not at all. A rescue's follow-ups
  // are best effort after its commit (the storage actor runs them), and so
  // are a failure's (a retry, a dead-lettering) when the caller says so.
  if (!follow_ups_)
    return;
  auto after_commit = [&](const job_event& e) {
    return e.type == event_type::rescued
           || ((e.type == event_type::exhausted || e.type == event_type::retried)
               && failures == failure_follow_ups::after_commit);
  };
  std::vector<enqueue_request> requests;
  for (auto& r : reports) {
    if (r.has_event && !r.event.job_json.empty() && !after_commit(r.event)) {
      auto more = follow_ups_of(follow_ups_, r.event);
      std::move(more.begin(), more.end(), std::back_inserter(requests));
    }
    if (r.has_resolution && !after_commit(r.resolution)) {
      auto more = follow_ups_of(follow_ups_, r.resolution);
      std::move(more.begin(), more.end(), std::back_inserter(requests));
    }
  }
  if (!requests.empty())
    enqueue_many(tx, requests);
}

// -- transactional groups --------------------------------------------------------
// job_store::transact: the handlers of a group run in one transaction, each
// in a savepoint, and their outcomes commit together (docs/transactional.md).

namespace {

/// A failure of `job` to record the usual way instead of its transaction.
job_outcome rolled_back(const job_outcome& job, const std::string& why) {
  job_outcome out = job;
  out.kind = outcome_kind::retryable_failure;
  out.message = why;
  out.delay_ms = 0;
  out.record = outcome_record::pending;
  out.has_event = false;
  out.event = {};
  out.has_resolution = false;
  out.resolution = {};
  return out;
}

/// `job` as recorded by its own transaction (`record`).
job_outcome recorded(job_outcome job, outcome_record record) {
  job.record = record;
  return job;
}

/// `out` (what a handler returned, or its failure) as the outcome of run
/// `job`: the run's identity, which the handler cannot change.
job_outcome as_run(job_outcome out, const job_outcome& job) {
  out.job_id = job.job_id;
  out.lease = job.lease;
  out.attempt = job.attempt;
  out.observed = job.observed;
  out.job_kind = job.job_kind;
  out.queue = job.queue;
  return out;
}

/// Whether `e` says the connection is gone (or a COMMIT's fate unknown):
/// the transaction is lost, not just a statement of it.
bool connection_lost(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const pqxx::broken_connection&) {
    return true;
  } catch (const pqxx::in_doubt_error&) {
    return true;
  } catch (...) {
    return false;
  }
}

/// Whether `e` is a statement that waited too long for a lock
/// (lock_timeout) or was chosen to break a deadlock.
bool lock_wait(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const pqxx::sql_error& ex) {
    return ex.sqlstate() == "55P03" || ex.sqlstate() == "40P01";
  } catch (...) {
    return false;
  }
}

/// What `e` says, for a message.
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

/// Thrown by run_in_savepoint when libpqxx rolled the whole transaction
/// back: a statement a handler sent with exec() failed (libpqxx 6 aborts
/// the transaction then; exec_params and exec_prepared leave it to the
/// savepoint). `cause`: that statement's error.
struct transaction_closed {
  std::exception_ptr cause;
};

/// Milliseconds as text, for set_config.
std::string ms_text(std::chrono::milliseconds d) {
  return std::to_string(std::max<int64_t>(d.count(), 1));
}

} // namespace

/// While a group's transaction is open: when it started, its runs, whether
/// a savepoint is open, the connection, and which run's handler runs on it
/// now (a stopped run cancels only its own statement).
struct job_store::group_state {
  std::chrono::steady_clock::time_point started;
  const std::vector<transactional_run*>* runs = nullptr;
  /// A run's savepoint is open (released by the next one's start: one
  /// round trip per run; the COMMIT releases the last).
  bool savepoint = false;
  std::mutex mtx;
  pqxx::connection_base* conn = nullptr;
  size_t active = SIZE_MAX;

  void set_active(size_t i) {
    std::lock_guard<std::mutex> lock{mtx};
    active = i;
  }

  void cancel(size_t i) {
    std::lock_guard<std::mutex> lock{mtx};
    if (conn == nullptr || active != i)
      return;
    try {
      conn->cancel_query();
    } catch (...) {
      // nothing to cancel, or the connection is gone: either way done
    }
  }

  void disarm() {
    std::lock_guard<std::mutex> lock{mtx};
    conn = nullptr;
  }
};

void job_store::transact(const std::vector<transactional_run*>& runs,
                         std::chrono::milliseconds lock_timeout) {
  auto started = std::chrono::steady_clock::now();
  connect();
  if (backend_started_.empty()) {
    pqxx::nontransaction q(*conn_, "aw_backend_start");
    auto r = run(q, "aw_backend_start");
    if (!r.empty())
      backend_started_ = r[0]["started"].as<std::string>();
  }
  // A run stopped (deadline, lost lease, cancel request, shutdown) while a
  // statement of its handler runs has that statement cancelled, so it
  // rolls back now, not at its limit. The guard ends that once the
  // transaction is over: the connection goes on to other runs.
  auto guard = std::make_shared<group_state>();
  guard->started = started;
  guard->runs = &runs;
  guard->conn = conn_.get();
  struct disarm {
    std::shared_ptr<group_state> g;
    ~disarm() {
      g->disarm();
    }
  } disarmed{guard};
  for (size_t i = 0; i < runs.size(); ++i)
    runs[i]->cancel.on_cancel([guard, i](const std::string&) { guard->cancel(i); });
  auto limit = runs.front()->limit;
  for (auto* r : runs) {
    limit = std::min(limit, r->limit);
    // A lane completion returns its row (for the hooks and follow-ups)
    // when its kind is observed, as on the batched path.
    r->job.observed = r->job.observed || observed_.count(r->job.job_kind) > 0;
  }
  // (Held in an optional: a connection that broke is dropped only once
  // the transaction object that refers to it is gone.)
  std::optional<pqxx::work> open;
  open.emplace(*conn_, "aw_transactional");
  auto& tx = *open;
  run(tx, "aw_transactional_limits", ms_text(limit),
      runs.size() > 1 && lock_timeout.count() > 0 ? ms_text(lock_timeout)
                                                  : std::string{"0"},
      opts_.worker_id);
  auto held = take_leases(tx, runs);
  std::vector<transactional_run*> live;
  for (auto* r : runs) {
    if (held.count(r->job.job_id) > 0)
      live.push_back(r);
    else
      r->result = recorded(r->job, outcome_record::stale);
  }
  // The handlers, each in its savepoint. `ran`: those whose outcome this
  // transaction is to commit.
  std::vector<transactional_run*> ran;
  size_t next = 0;
  try {
    for (; next < live.size(); ++next)
      if (run_in_savepoint(tx, *live[next], *guard))
        ran.push_back(live[next]);
  } catch (const transaction_closed& closed) {
    // The run whose statement failed is charged for it, recorded the usual
    // way; the others lost their writes through no fault of theirs and run
    // again, charged nothing.
    auto* failed = live[next];
    failed->result = as_run(outcome_of_exception(failed->job.job_id,
                                                 failed->job.job_kind,
                                                 closed.cause),
                            failed->job);
    for (auto* r : ran)
      r->again = true;
    for (size_t i = next + 1; i < live.size(); ++i)
      live[i]->again = true;
    return;
  } catch (...) {
    // The transaction is lost (the connection broke, the server ended it,
    // a savepoint could not be rolled back to).
    auto e = std::current_exception();
    open.reset();
    if (connection_lost(e))
      disconnect();
    bool any_started = std::any_of(live.begin(), live.end(), [](auto* r) {
      return r->handler_ran;
    });
    if (!any_started)
      throw;
    auto why = "its transaction failed after its handler ran (" + what_of(e)
               + "); its writes were rolled back";
    for (size_t i = next; i < live.size(); ++i)
      if (!live[i]->handler_ran)
        live[i]->again = true; // charged nothing: it runs in another
    for (auto* r : live)
      if (r->handler_ran && !r->again)
        r->result = rolled_back(r->job, why);
    return;
  }
  if (ran.empty())
    return; // nothing to commit: the leases roll back with the rest
  commit_group(open, ran, *guard);
}

bool job_store::run_in_savepoint(pqxx::work& tx, transactional_run& r,
                                 group_state& group) {
  auto started = group.started;
  const auto& runs = *group.runs;
  // A run alone needs no savepoint (a round trip saved): the transaction
  // holds nothing else, so a failure rolls all of it back and is recorded
  // the usual way, as when libpqxx ends a group's transaction.
  bool single = runs.size() == 1;
  if (r.may_start && !r.may_start())
    return false; // withdrawn by its owner: nothing of it runs
  if (r.cancel.cancelled()) {
    r.result = rolled_back(r.job, "the run was stopped before its handler "
                                  "started (" + r.cancel.reason() + ")");
    return false;
  }
  auto elapsed = std::chrono::steady_clock::now() - started;
  if (elapsed >= r.limit) {
    // The group took its time: the run goes to another transaction.
    r.again = true;
    return false;
  }
  if (!single) {
    tx.exec0(group.savepoint ? "RELEASE SAVEPOINT aw_run; SAVEPOINT aw_run"
                             : "SAVEPOINT aw_run");
    group.savepoint = true;
  }
  size_t index = static_cast<size_t>(
    std::find(runs.begin(), runs.end(), &r) - runs.begin());
  group.set_active(index);
  r.handler_ran = true;
  job_outcome out;
  std::exception_ptr failure;
  try {
    out = (*r.body)(tx);
  } catch (...) {
    failure = std::current_exception();
  }
  group.set_active(SIZE_MAX);
  if (failure && connection_lost(failure))
    std::rethrow_exception(failure);
  if (failure && single)
    throw transaction_closed{failure};
  bool keep = !failure && !r.cancel.cancelled()
              && std::chrono::steady_clock::now() - started <= r.limit;
  try {
    // A run kept stays in its savepoint until the next one starts. (A
    // single run not kept commits nothing: its transaction is dropped.)
    if (!keep && !single)
      tx.exec0("ROLLBACK TO SAVEPOINT aw_run");
  } catch (const pqxx::usage_error&) {
    if (!failure)
      throw;
    throw transaction_closed{failure};
  }
  if (failure && runs.size() > 1 && lock_wait(failure)) {
    // It waited on another transaction's lock: alone, it may wait.
    r.again = true;
    r.alone = true;
    return false;
  }
  if (failure) {
    // Its writes are gone; its failure commits with the others' outcomes.
    r.result = as_run(outcome_of_exception(r.job.job_id, r.job.job_kind, failure),
                      r.job);
    return true;
  }
  out = as_run(std::move(out), r.job);
  if (r.cancel.cancelled()) {
    // Whatever stopped the run also stops its writes: the executor
    // records the failure this becomes as the cancellation demands (a
    // deadline rescue, a cancel, or nothing once the job is lost).
    r.result = rolled_back(out, "the run was stopped before its transaction "
                                "committed (" + r.cancel.reason()
                                  + "); its writes were rolled back");
    return false;
  }
  if (!keep) {
    r.result = rolled_back(out, "its transaction ran past its limit of "
                                  + std::to_string(r.limit.count())
                                  + " ms; its writes were rolled back");
    return false;
  }
  r.result = std::move(out);
  return true;
}

std::set<int64_t>
job_store::take_leases(pqxx::work& tx, const std::vector<transactional_run*>& runs) {
  const auto& me = opts_.worker_id;
  std::vector<int64_t> ids, leases, lane_ids, lane_leases;
  for (auto* r : runs) {
    bool lane = on_lane(r->job.lease);
    (lane ? lane_ids : ids).push_back(r->job.job_id);
    (lane ? lane_leases : leases).push_back(r->job.lease);
  }
  // Lane jobs stay on their lane, locked (a completion is a receipt at the
  // commit, as on the batched path); row-claimed jobs are locked as the
  // running rows they are.
  std::set<int64_t> held;
  if (!lane_ids.empty())
    for (const auto& row : run(tx, "aw_transactional_lane_lease", me,
                               to_array_literal(lane_leases),
                               to_array_literal(lane_ids)))
      held.insert(row[0].as<int64_t>());
  if (!ids.empty())
    for (const auto& row : run(tx, "aw_transactional_lease", me,
                               to_array_literal(ids), to_array_literal(leases)))
      held.insert(row[0].as<int64_t>());
  return held;
}

void job_store::commit_group(std::optional<pqxx::work>& open,
                             const std::vector<transactional_run*>& ran,
                             group_state& guard) {
  auto& tx = *open;
  std::vector<job_outcome> outcomes;
  outcomes.reserve(ran.size());
  for (auto* r : ran)
    outcomes.push_back(r->result);
  std::vector<finish_report> reports;
  try {
    reports = finish_in(tx, outcomes);
  } catch (...) {
    auto e = std::current_exception();
    if (connection_lost(e)) {
      open.reset();
      disconnect();
      for (auto* r : ran)
        r->result = rolled_back(r->result, "its transaction failed before "
                                           "it committed (" + what_of(e)
                                             + "); its writes were rolled back");
      return;
    }
    if (ran.size() == 1) {
      // Its outcome or a follow-up of it failed: the failure is recorded
      // the usual way, its writes rolled back.
      ran.front()->result = as_run(outcome_of_exception(ran.front()->job.job_id,
                                                        ran.front()->job.job_kind, e),
                                   ran.front()->job);
      return;
    }
    // One run's outcome or follow-up failed, and with it the group's
    // transaction: each runs again alone, where only that one fails.
    for (auto* r : ran) {
      r->again = true;
      r->alone = true;
    }
    return;
  }
  for (size_t i = 0; i < ran.size(); ++i) {
    if (reports[i].result != finish_result::applied) {
      // Never while the rows are locked under the leases; should it
      // happen, nothing of the group commits, and each run goes again
      // alone (where the lease is read afresh).
      for (auto* r : ran) {
        r->again = true;
        r->alone = true;
      }
      return;
    }
  }
  for (size_t i = 0; i < ran.size(); ++i) {
    auto& out = ran[i]->result;
    out.has_event = reports[i].has_event;
    out.event = std::move(reports[i].event);
    out.has_resolution = reports[i].has_resolution;
    out.resolution = std::move(reports[i].resolution);
  }
  int pid = conn_->backendpid();
  auto backend = backend_started_;
  try {
    tx.commit();
  } catch (const pqxx::in_doubt_error&) {
    open.reset();
    guard.disarm();
    disconnect();
    // One commit for all: the first run's lease tells for every run (the
    // others are read only when its run was stopped before it could tell).
    std::optional<bool> first;
    for (auto* r : ran) {
      auto held = first ? first
                        : still_held_after_lost_commit(r->job, pid, backend, r->cancel);
      first = held;
      if (!held)
        r->result = rolled_back(r->result, "its transaction's COMMIT got no reply, and "
                                           "the run was stopped (" + r->cancel.reason()
                                             + ") before reading could tell whether it "
                                               "committed");
      else if (*held)
        r->result = rolled_back(r->result, "its transaction's COMMIT got no reply, and "
                                           "reading showed it did not commit; its "
                                           "writes were not applied");
      else
        r->result.record = outcome_record::committed;
    }
    return;
  }
  for (auto* r : ran)
    r->result.record = outcome_record::committed;
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

int64_t job_store::delete_expired(int batch) {
  connect();
  double seconds = fractional_seconds(opts_.completed_retention);
  pqxx::work tx(*conn_, "aw_cleanup");
  auto result = run(tx, "aw_cleanup", seconds, batch);
  int64_t deleted = result.affected_rows();
  run(tx, "aw_close_batches", batch);
  if (opts_.dead_letter_retention.count() > 0) {
    double dead_seconds = fractional_seconds(opts_.dead_letter_retention);
    deleted += run(tx, "aw_cleanup_dead_letters", dead_seconds, batch)
                 .affected_rows();
  }
  run(tx, "aw_cleanup_cancel_requests", batch);
  run(tx, "aw_cleanup_starts", batch);
  // Processes gone for ten reclaim windows (not counted: not jobs).
  run(tx, "aw_cleanup_nodes", 10 * fractional_seconds(opts_.reclaim_window));
  tx.commit();
  return deleted;
}

bool job_store::refresh_node(int64_t held, bool candidate) {
  connect();
  pqxx::nontransaction tx(*conn_, "aw_node_refresh");
  auto rows = run(tx, "aw_node_refresh", opts_.worker_id, opts_.node,
                  opts_.host, static_cast<int>(::getpid()), opts_.version,
                  to_text_array_literal(opts_.queues), held,
                  leader_lease_seconds(), candidate, served_kinds_);
  // A worker holding nothing sends no heartbeat(): its claims in doubt
  // are taken back here (see heartbeat()).
  if (held == 0)
    run(tx, "aw_take_back_orphans", opts_.worker_id, std::string{"{}"},
        fractional_seconds(opts_.reclaim_window));
  return !rows.empty() && rows[0][0].as<bool>();
}

bool job_store::resign() {
  connect();
  pqxx::nontransaction tx(*conn_, "aw_leader_resign");
  return !run(tx, "aw_leader_resign", opts_.worker_id,
              std::string{defaults::leader_channel})
            .empty();
}

double job_store::leader_lease_seconds() const {
  // Renewed every heartbeat round: a killed leader's lease runs out, and
  // the next candidate round (at most one interval later) takes it, within
  // the reclaim window (config validation keeps it >= 3 intervals).
  return fractional_seconds(lease_length(opts_.reclaim_window,
                                         opts_.heartbeat_interval));
}

std::vector<std::string> job_store::apply_queue_controls() {
  connect();
  std::vector<std::string> changes;
  auto rate_text = [](int n, int64_t period_ms) {
    if (n == 0)
      return std::string{"none"};
    return std::to_string(n) + (period_ms == 60'000 ? "/m" : "/s");
  };
  pqxx::work tx(*conn_, "aw_queue_controls_apply");
  for (auto& q : opts_.queue_limits) {
    auto row = run(tx, "aw_queue_controls_apply", q.queue,
                   q.global_concurrency, q.rate_limit, q.rate_period_ms)[0];
    if (!row["existed"].as<bool>())
      continue;
    auto old_gc = row["old_global_concurrency"].as<int>();
    if (old_gc != q.global_concurrency)
      changes.push_back("queue " + q.queue + ": global_concurrency "
                        + (old_gc == 0 ? "none" : std::to_string(old_gc))
                        + " -> "
                        + (q.global_concurrency == 0
                             ? "none"
                             : std::to_string(q.global_concurrency)));
    auto old_rate = rate_text(row["old_rate_limit"].as<int>(),
                              row["old_rate_period_ms"].as<int64_t>());
    auto new_rate = rate_text(q.rate_limit, q.rate_period_ms);
    if (old_rate != new_rate)
      changes.push_back("queue " + q.queue + ": rate_limit " + old_rate
                        + " -> " + new_rate);
  }
  tx.commit();
  return changes;
}

void job_store::leave() {
  connect();
  pqxx::nontransaction tx(*conn_, "aw_node_leave");
  run(tx, "aw_node_leave", opts_.worker_id);
}

std::vector<int64_t>
job_store::cancel_requests(const std::vector<int64_t>& jobs) {
  connect();
  std::vector<int64_t> out;
  if (jobs.empty())
    return out;
  pqxx::nontransaction tx(*conn_, "aw_cancel_requests");
  for (const auto& row : run(tx, "aw_cancel_requests",
                                          to_array_literal(jobs)))
    out.push_back(row["job_id"].as<int64_t>());
  return out;
}

std::vector<std::pair<int64_t, double>>
job_store::wait_times(const std::vector<int64_t>& jobs) {
  connect();
  std::vector<std::pair<int64_t, double>> out;
  if (jobs.empty())
    return out;
  pqxx::nontransaction tx(*conn_, "aw_wait_times");
  auto rows = run(tx, "aw_wait_times", to_array_literal(jobs));
  out.reserve(rows.size());
  for (const auto& row : rows)
    out.emplace_back(row[0].as<int64_t>(), row[1].as<double>());
  return out;
}

queue_samples job_store::sample_queues() {
  connect();
  pqxx::read_transaction tx(*conn_, "aw_queue_samples");
  queue_samples_settings(tx);
  return to_queue_samples(run(tx, "aw_queue_samples",
                              fractional_seconds(opts_.reclaim_window)));
}

std::vector<std::string> job_store::maintain_ring(int max_carried) {
  connect();
  std::vector<std::string> done;
  const auto retention = opts_.completed_retention;
  const auto period = std::clamp(
    retention / defaults::ring_periods_per_retention,
    std::chrono::duration_cast<std::chrono::milliseconds>(
      defaults::ring_period_min),
    std::chrono::duration_cast<std::chrono::milliseconds>(
      defaults::ring_period_max));
  const auto lock_timeout =
    std::to_string(defaults::ring_lock_timeout.count()) + "ms";
  // A lock it cannot get in time (a long transaction holds the slot) is
  // left to the next round rather than queueing the hot path behind it.
  auto timed_out = [](const pqxx::sql_error& e) {
    return e.sqlstate() == "55P03" || e.sqlstate() == "57014";
  };
  try {
    pqxx::work tx(*conn_, "aw_ring_period");
    auto r = run(tx, "aw_ring_period",
                 std::chrono::duration_cast<std::chrono::seconds>(period).count());
    tx.commit();
    if (!r.empty())
      done.push_back("set the ring's period to "
                     + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(period).count())
                     + " s (was " + r[0]["old_seconds"].as<std::string>() + " s)");
  } catch (const pqxx::sql_error& e) {
    if (!timed_out(e))
      throw;
  }
  try {
    pqxx::work tx(*conn_, "aw_recycle");
    tx.exec_params("SELECT set_config('lock_timeout', $1, true), "
                   "set_config('idle_in_transaction_session_timeout', $2, true)",
                   lock_timeout,
                   std::to_string(defaults::ring_idle_timeout.count()) + "ms");
    auto r = run(tx, "aw_recycle", fractional_seconds(retention), max_carried);
    tx.commit();
    if (!r.empty() && !r[0]["done"].is_null())
      done.push_back(r[0]["done"].as<std::string>());
  } catch (const pqxx::sql_error& e) {
    if (!timed_out(e))
      throw;
    // Say who holds it, so an operator can find a forgotten transaction.
    std::string holders;
    try {
      pqxx::read_transaction tx(*conn_, "aw_ring_lock_holders");
      for (const auto& row : run(tx, "aw_ring_lock_holders"))
        holders += (holders.empty() ? "" : ", ") + std::string{"pid "}
                   + row["pid"].as<std::string>() + " ("
                   + row["application"].as<std::string>() + ", "
                   + row["state"].as<std::string>() + ", transaction open "
                   + row["open_seconds"].as<std::string>() + " s)";
    } catch (const pqxx::sql_error&) {
      // Only a diagnostic.
    }
    done.push_back("emptying a ring slot waited past its lock timeout"
                   + (holders.empty() ? std::string{}
                                      : " behind " + holders)
                   + ": next round");
  }
  return done;
}

std::vector<std::string> job_store::vacuum(int64_t min_dead, double share) {
  connect();
  std::vector<std::string> due = maintain_ring();
  std::vector<std::string> vacuumed;
  {
    pqxx::nontransaction tx(*conn_, "aw_dead_tuples");
    for (const auto& row : run(tx, "aw_dead_tuples")) {
      auto dead = row["n_dead_tup"].as<int64_t>();
      auto live = row["n_live_tup"].as<int64_t>();
      auto name = row["relname"].as<std::string>();
      auto before = dead_when_vacuumed_.find(name);
      // Dead tuples that did not go at the last vacuum are held by an open
      // transaction: wait until as many again have come.
      bool grown = before == dead_when_vacuumed_.end() || dead < before->second
                   || dead >= before->second + min_dead;
      if (grown && dead >= min_dead
          && static_cast<double>(dead) >= share * static_cast<double>(live)) {
        vacuumed.push_back(name);
        dead_when_vacuumed_[name] = dead;
      }
    }
  }
  // The names come from the fixed list above, never from input. VACUUM
  // cannot run inside a transaction block.
  for (auto& table : vacuumed) {
    pqxx::nontransaction tx(*conn_, "aw_vacuum");
    tx.exec("VACUUM " + conn_->quote_name(table));
    due.push_back("vacuumed " + table);
  }
  return due;
}

} // namespace aw::storage
