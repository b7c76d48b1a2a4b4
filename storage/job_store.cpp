#include "actor_worker/storage/job_store.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
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
    {"aw_batch_jobs", sql::batch_jobs},
    {"aw_finish_lane", sql::finish_lane},
    {"aw_lane_rows", sql::lane_rows},
    {"aw_lane_rows_deleted", sql::lane_rows_deleted},
    {"aw_complete", sql::complete},
    {"aw_complete_delete", sql::complete_delete},
    {"aw_retry", sql::retry},
    {"aw_dead_letter", sql::dead_letter},
    {"aw_release", sql::release},
    {"aw_release_lane", sql::release_lane},
    {"aw_cleanup", sql::cleanup},
    {"aw_dead_tuples", sql::dead_tuples},
    {"aw_cleanup_lanes", sql::cleanup_lanes},
    {"aw_lane_rotate", sql::lane_rotate},
    {"aw_lane_partition_chores", sql::lane_partition_chores},
    {"aw_lane_generation_gone", sql::lane_generation_gone},
    {"aw_cleanup_dead_letters", sql::cleanup_dead_letters},
    {"aw_cleanup_cancel_requests", sql::cleanup_cancel_requests},
    {"aw_cancel_requests", sql::cancel_requests},
    {"aw_heartbeat", sql::heartbeat},
    {"aw_heartbeat_batches", sql::heartbeat_batches},
    {"aw_snooze", sql::snooze},
    {"aw_cancel", sql::cancel},
    {"aw_wait", sql::wait},
    {"aw_expire_batches", sql::expire_batches},
    {"aw_rescue", sql::rescue},
    {"aw_wait_times", sql::wait_times},
    {"aw_node_refresh", sql::node_refresh},
    {"aw_node_leave", sql::node_leave},
    {"aw_leader_resign", sql::leader_resign},
    {"aw_cleanup_nodes", sql::cleanup_nodes},
    {"aw_queue_samples", sql::queue_samples},
    {"aw_queue_controls_apply", sql::queue_controls_apply},
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
}

void job_store::disconnect() noexcept {
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

/// Appends the jobs of claim rows to `out`. Rows without a batch_id say
/// something else (their kind): 'batch' (lane batch `id` was claimed: its
/// jobs are read next), 'owned' (a fused finish still owned batch `id`),
/// 'waiting' (due jobs wait behind an open transaction), 'bytes' (the byte
/// bound stopped the claim), 'set_aside' (`id` jobs of kind `args` were left
/// for workers that run it), 'paused' (the queue is paused), 'limited' (a
/// queue limit cut the claim; deadline_ms: when the rate window frees).
void parse_claim_rows(const pqxx::result& rows, const std::string& queue,
                      claim_result& out, std::vector<int64_t>* batches,
                      std::unordered_set<int64_t>* owned) {
  if (rows.empty())
    return;
  // Columns by name, looked up once per result rather than once per field.
  auto batch_id = rows.column_number("batch_id");
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
  out.jobs.reserve(out.jobs.size() + rows.size());
  for (const auto& row : rows) {
    if (row[batch_id].is_null()) {
      auto what = row[kind].as<std::string>();
      if (what == "batch") {
        if (batches != nullptr)
          batches->push_back(row[id].as<int64_t>());
      } else if (what == "owned") {
        if (owned != nullptr)
          owned->insert(row[id].as<int64_t>());
      } else if (what == "bytes") {
        out.byte_bound = true;
      } else if (what == "paused") {
        out.paused = true;
      } else if (what == "limited") {
        out.limited = true;
        out.retry_after_ms = row[deadline_ms].is_null()
                               ? -1
                               : row[deadline_ms].as<int64_t>();
      } else if (what == "set_aside") {
        // One row per kind and scan step: summed per kind and priority.
        set_aside_jobs s{row[args].as<std::string>(),
                         row[priority].as<int32_t>(), row[id].as<int64_t>()};
        auto same = std::find_if(out.set_aside.begin(), out.set_aside.end(),
                                 [&](const set_aside_jobs& x) {
                                   return x.kind == s.kind
                                          && x.priority == s.priority;
                                 });
        if (same != out.set_aside.end())
          same->count += s.count;
        else
          out.set_aside.push_back(std::move(s));
      } else {
        out.more_soon = true;
      }
      continue;
    }
    claimed_job job;
    job.batch_id = row[batch_id].as<int64_t>();
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
    if (!row[event_row].is_null())
      job.started_row = row[event_row].as<std::string>();
    out.jobs.push_back(std::move(job));
  }
}

} // namespace

claim_result job_store::read_batches(pqxx::result rows,
                                     const std::string& queue,
                                     int64_t default_deadline_ms,
                                     std::unordered_set<int64_t>* owned) {
  claim_result out;
  std::vector<int64_t> batches;
  parse_claim_rows(rows, queue, out, &batches, owned);
  rows.clear();
  if (batches.empty())
    return out;
  // The lane batches' jobs: read-only, outside the claim's transaction,
  // and put where their batch was in claim order (priority first).
  std::vector<claimed_job> ordered;
  ordered.reserve(out.jobs.size());
  auto next = out.jobs.begin();
  for (auto batch : batches) {
    claim_result part;
    {
      pqxx::nontransaction tx(*conn_, "aw_batch_jobs");
      parse_claim_rows(run(tx, "aw_batch_jobs", batch,
                                        default_deadline_ms, observed_kinds_),
                       queue, part, nullptr, nullptr);
    }
    if (part.jobs.empty())
      continue;
    // Row-per-state jobs of higher or equal priority came first.
    auto prio = part.jobs.front().priority;
    while (next != out.jobs.end() && next->priority <= prio)
      ordered.push_back(std::move(*next++));
    std::move(part.jobs.begin(), part.jobs.end(), std::back_inserter(ordered));
  }
  std::move(next, out.jobs.end(), std::back_inserter(ordered));
  out.jobs = std::move(ordered);
  return out;
}

claim_result job_store::claim(const std::string& queue, int limit,
                              int64_t max_bytes, int64_t default_deadline_ms) {
  connect();
  // One statement in autocommit (no BEGIN/COMMIT round trips), then one
  // read per lane batch claimed.
  pqxx::result rows;
  {
    pqxx::nontransaction tx(*conn_, "aw_claim");
    rows = run(tx, "aw_claim", queue, opts_.worker_id, limit,
                            max_bytes, default_deadline_ms, observed_kinds_,
                            static_cast<int64_t>(opts_.fence_wait.count()),
                            served_kinds_);
  }
  return read_batches(std::move(rows), queue, default_deadline_ms, nullptr);
}

bool job_store::fusable(const std::vector<job_outcome>& outcomes) {
  for (auto& o : outcomes)
    if (o.batch_id == 0 || o.kind != outcome_kind::completed || o.observed)
      return false;
  return true;
}

std::pair<std::vector<finish_report>, claim_result>
job_store::finish_and_claim(const std::vector<job_outcome>& outcomes,
                            const std::string& queue, int limit,
                            int64_t max_bytes, int64_t default_deadline_ms,
                            bool in_doubt) {
  connect();
  std::vector<int64_t> jobs;
  std::vector<int64_t> batches;
  jobs.reserve(outcomes.size());
  batches.reserve(outcomes.size());
  for (auto& o : outcomes) {
    jobs.push_back(o.job_id);
    batches.push_back(o.batch_id);
  }
  pqxx::result rows;
  {
    pqxx::nontransaction tx(*conn_, "aw_finish_and_claim");
    rows = run(
      tx, "aw_finish_and_claim", opts_.worker_id, to_array_literal(jobs),
      to_array_literal(batches), opts_.completed_retention.count() == 0, queue,
      limit, max_bytes, default_deadline_ms, observed_kinds_,
      static_cast<int64_t>(opts_.fence_wait.count()), in_doubt, served_kinds_);
  }
  std::unordered_set<int64_t> owned;
  auto claimed = read_batches(std::move(rows), queue, default_deadline_ms,
                              &owned);
  std::vector<finish_report> reports(outcomes.size());
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (owned.count(outcomes[i].batch_id) > 0)
      reports[i].result = finish_result::applied;
  return {std::move(reports), std::move(claimed)};
}

std::vector<finish_report>
job_store::finish(const std::vector<job_outcome>& outcomes, bool in_doubt) {
  connect();
  std::vector<finish_report> reports(outcomes.size());
  auto fire = [&](size_t i, event_type type, std::string json) {
    reports[i].result = finish_result::applied;
    reports[i].event = transition_event(type, std::move(json), outcomes[i]);
    reports[i].has_event = true;
  };
  bool deleting = opts_.completed_retention.count() == 0;

  // The hot path: only lane completions nobody observes (so no events and
  // no follow-ups). One statement in autocommit.
  std::unique_ptr<pqxx::transaction_base> tx;
  if (fusable(outcomes))
    tx = std::make_unique<pqxx::nontransaction>(*conn_, "aw_finish");
  else
    tx = std::make_unique<pqxx::work>(*conn_, "aw_finish");

  // 1. Lane outcomes: completions recorded per batch, the others turned
  // into ordinary running rows for step 2. An outcome of a batch no longer
  // ours is stale.
  std::vector<int64_t> lane_jobs;
  std::vector<int64_t> lane_batches;
  std::vector<bool> lane_done;
  std::vector<size_t> lane_index;
  std::vector<int64_t> observed_done;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    auto& o = outcomes[i];
    if (o.batch_id == 0)
      continue;
    lane_jobs.push_back(o.job_id);
    lane_batches.push_back(o.batch_id);
    lane_done.push_back(o.kind == outcome_kind::completed);
    lane_index.push_back(i);
    if (o.kind == outcome_kind::completed && o.observed)
      observed_done.push_back(o.job_id);
  }
  std::unordered_map<int64_t, std::string> lane_rows;
  auto read_lane_rows = [&](const char* stmt) {
    if (observed_done.empty())
      return;
    for (const auto& row :
         run(*tx, stmt, to_array_literal(observed_done)))
      lane_rows.emplace(row["id"].as<int64_t>(),
                        row["row_json"].as<std::string>());
  };
  std::vector<bool> materialized(outcomes.size(), false);
  if (!lane_jobs.empty()) {
    if (deleting)
      read_lane_rows("aw_lane_rows_deleted");
    auto rows = run(*tx, "aw_finish_lane", opts_.worker_id,
                                  to_array_literal(lane_jobs),
                                  to_array_literal(lane_batches),
                                  to_array_literal(lane_done), deleting,
                                  in_doubt);
    std::unordered_set<int64_t> owned;
    for (const auto& row : rows)
      owned.insert(row["batch_id"].as<int64_t>());
    if (!deleting)
      read_lane_rows("aw_lane_rows");
    for (auto i : lane_index) {
      auto& o = outcomes[i];
      if (owned.count(o.batch_id) == 0)
        continue; // stale: the batch is no longer ours
      if (o.kind == outcome_kind::completed) {
        reports[i].result = finish_result::applied;
        if (auto r = lane_rows.find(o.job_id); r != lane_rows.end())
          fire(i, event_type::completed, std::move(r->second));
      } else {
        // Now an ordinary running row of this run (the attempt counted).
        materialized[i] = true;
      }
    }
  }

  // 2. Row-per-state outcomes (and the lane failures just materialized),
  // each guarded by its run: running under this worker with its attempt.
  std::vector<int64_t> completed;
  std::vector<int32_t> completed_attempts;
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (outcomes[i].batch_id == 0
        && outcomes[i].kind == outcome_kind::completed) {
      completed.push_back(outcomes[i].job_id);
      completed_attempts.push_back(outcomes[i].attempt);
    }
  if (!completed.empty()) {
    auto rows = run(*tx, deleting ? "aw_complete_delete"
                                           : "aw_complete",
                                  to_array_literal(completed), opts_.worker_id,
                                  observed_kinds_, defaults::notify_channel,
                                  to_array_literal(completed_attempts));
    std::unordered_map<int64_t, std::string> applied;
    for (const auto& row : rows)
      applied.emplace(row["id"].as<int64_t>(),
                      row["row"].is_null() ? std::string{}
                                           : row["row"].as<std::string>());
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i].batch_id != 0
          || outcomes[i].kind != outcome_kind::completed)
        continue;
      auto a = applied.find(outcomes[i].job_id);
      if (a == applied.end())
        continue;
      reports[i].result = finish_result::applied;
      // Without observers nobody needs the event: keep the hot path lean.
      if (!a->second.empty())
        fire(i, event_type::completed, std::move(a->second));
    }
  }
  auto single = [&](const char* stmt, auto&&... args) -> std::optional<std::string> {
    auto r = run(*tx, stmt, std::forward<decltype(args)>(args)...);
    if (r.empty())
      return std::nullopt;
    return r[0]["row_json"].template as<std::string>();
  };
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (o.kind == outcome_kind::completed)
      continue;
    if (o.batch_id != 0 && !materialized[i])
      continue; // a stale lane outcome
    const auto& me = opts_.worker_id;
    auto attempt = o.attempt;
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
        bool rescue = o.kind == outcome_kind::abandoned;
        if (auto row = single("aw_retry", o.job_id, me, o.message,
                              opts_.max_retries, delay, attempt)) {
          fire(i, rescue ? event_type::rescued : event_type::retried,
               std::move(*row));
        } else if (auto row = single("aw_dead_letter", o.job_id, me, o.message,
                                     defaults::notify_channel, attempt)) {
          fire(i, rescue ? event_type::rescued : event_type::exhausted,
               std::move(*row));
        }
        if (rescue && reports[i].has_event)
          reports[i].event.reason = rescue_reason::deadline_exceeded;
        break;
      }
      case outcome_kind::terminal_failure:
        if (auto row = single("aw_dead_letter", o.job_id, me, o.message,
                              defaults::notify_channel, attempt))
          fire(i, event_type::exhausted, std::move(*row));
        break;
      case outcome_kind::snoozed:
        if (single("aw_snooze", o.job_id, me, o.delay_ms, attempt))
          reports[i].result = finish_result::applied; // snoozes fire nothing
        break;
      case outcome_kind::cancelled:
        if (auto row = single("aw_cancel", o.job_id, me, o.message,
                              defaults::notify_channel, attempt))
          fire(i, event_type::cancelled, std::move(*row));
        break;
      case outcome_kind::waiting_callback:
        if (auto row = single("aw_wait", o.job_id, me, o.delay_ms, attempt))
          fire(i, event_type::waiting_for_callback, std::move(*row));
        break;
    }
  }
  // Durable follow-ups: inserted in this transaction, so they commit with
  // the transitions that trigger them, or not at all. A rescue's follow-ups
  // are best effort after its commit (the storage actor runs them).
  if (follow_ups_) {
    std::vector<enqueue_request> requests;
    for (auto& r : reports)
      if (r.has_event && !r.event.job_json.empty()
          && r.event.type != event_type::rescued) {
        auto more = follow_ups_of(follow_ups_, r.event);
        std::move(more.begin(), more.end(), std::back_inserter(requests));
      }
    if (!requests.empty())
      enqueue_many(*tx, requests);
  }
  if (auto* work = dynamic_cast<pqxx::work*>(tx.get()))
    work->commit();
  return reports;
}

int64_t job_store::release(const std::vector<held_job>& jobs, bool started) {
  if (jobs.empty())
    return 0;
  connect();
  std::vector<int64_t> rows;
  std::vector<int64_t> lane_jobs;
  std::vector<int64_t> lane_batches;
  for (auto& j : jobs) {
    if (j.batch_id == 0) {
      rows.push_back(j.id);
    } else {
      lane_jobs.push_back(j.id);
      lane_batches.push_back(j.batch_id);
    }
  }
  int64_t released = 0;
  pqxx::work tx(*conn_, "aw_release");
  if (!rows.empty()) {
    auto r = run(tx, "aw_release", to_array_literal(rows),
                              opts_.worker_id, defaults::notify_channel,
                              started);
    released += r.empty() ? 0 : r[0]["released"].as<int64_t>();
  }
  if (!lane_jobs.empty()) {
    auto r = run(tx, "aw_release_lane", opts_.worker_id,
                              to_array_literal(lane_jobs),
                              to_array_literal(lane_batches), started);
    released += r.empty() ? 0 : r[0]["released"].as<int64_t>();
  }
  tx.commit();
  return released;
}

int64_t job_store::release(const std::vector<claimed_job>& jobs,
                           bool started) {
  std::vector<held_job> held;
  held.reserve(jobs.size());
  for (auto& j : jobs)
    held.push_back({j.id, j.batch_id, 0});
  return release(held, started);
}

heartbeat_report job_store::heartbeat(const std::vector<int64_t>& jobs,
                                      const std::vector<int64_t>& batches) {
  heartbeat_report out;
  if (jobs.empty() && batches.empty())
    return out;
  connect();
  pqxx::nontransaction tx(*conn_, "aw_heartbeat");
  if (!jobs.empty())
    for (const auto& row : run(tx, "aw_heartbeat",
                                            to_array_literal(jobs),
                                            opts_.worker_id))
      out.jobs.push_back(row["id"].as<int64_t>());
  if (!batches.empty())
    for (const auto& row : run(tx, "aw_heartbeat_batches",
                                            to_array_literal(batches),
                                            opts_.worker_id))
      out.batches.push_back(row["id"].as<int64_t>());
  return out;
}

std::vector<rescued_job> job_store::rescue(int limit) {
  connect();
  double window = opts_.reclaim_window.count() / 1000.0;
  pqxx::work tx(*conn_, "aw_rescue");
  run(tx, "aw_expire_batches", window, limit);
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
    r.job_json = row["row"].as<std::string>();
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
  auto result = run(tx, "aw_cleanup", seconds, batch);
  int64_t deleted = result.affected_rows();
  auto lanes = run(tx, "aw_cleanup_lanes", seconds, batch);
  deleted += lanes.empty() ? 0 : lanes[0]["deleted"].as<int64_t>();
  if (opts_.dead_letter_retention.count() > 0) {
    double dead_seconds = opts_.dead_letter_retention.count() / 1000.0;
    deleted += run(tx, "aw_cleanup_dead_letters", dead_seconds, batch)
                 .affected_rows();
  }
  run(tx, "aw_cleanup_cancel_requests", batch);
  // Processes gone for ten reclaim windows (not counted: not jobs).
  run(tx, "aw_cleanup_nodes", 10 * opts_.reclaim_window.count() / 1000.0);
  tx.commit();
  return deleted;
}

bool job_store::refresh_node(int64_t held, bool candidate) {
  connect();
  pqxx::nontransaction tx(*conn_, "aw_node_refresh");
  auto rows = run(tx, "aw_node_refresh", opts_.worker_id, opts_.node,
                  opts_.host, static_cast<int>(::getpid()), opts_.version,
                  to_text_array_literal(opts_.queues), held,
                  leader_lease_seconds(), candidate);
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
  return (opts_.reclaim_window - opts_.heartbeat_interval).count() / 1000.0;
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
  return to_queue_samples(run(tx, "aw_queue_samples"));
}

std::vector<std::string> job_store::maintain_lane_partitions() {
  connect();
  std::vector<std::string> done;
  const auto retention = opts_.completed_retention;
  const auto every = std::clamp(
    retention / defaults::lane_generations_per_retention,
    std::chrono::duration_cast<std::chrono::milliseconds>(
      defaults::lane_generation_min),
    std::chrono::duration_cast<std::chrono::milliseconds>(
      defaults::lane_generation_max));
  const auto lock_timeout =
    std::to_string(defaults::lane_partition_lock_timeout.count()) + "ms";
  // A lock it cannot get in time (a long transaction holds the parent) is
  // left to the next round rather than queueing the hot path behind it.
  auto timed_out = [](const pqxx::sql_error& e) {
    return e.sqlstate() == "55P03" || e.sqlstate() == "57014";
  };
  try {
    // Two steps, two transactions (migrations/021): the first adds a due
    // generation's partition, pending; the second starts it once the
    // attach has committed, so that no enqueue is routed to a partition
    // its backend does not know yet.
    for (int step = 0; step < 2; ++step) {
      pqxx::work tx(*conn_, "aw_lane_rotate");
      tx.exec_params("SELECT set_config('lock_timeout', $1, true)",
                     lock_timeout);
      auto r = run(tx, "aw_lane_rotate", every.count() / 1000.0);
      tx.commit();
      if (!r.empty() && !r[0]["gen"].is_null())
        done.push_back("started lane partition job_rows_lane_"
                       + r[0]["gen"].as<std::string>());
    }
  } catch (const pqxx::sql_error& e) {
    if (!timed_out(e))
      throw;
    done.push_back("lane partition rotation waited past its lock timeout");
  }
  struct chore {
    int gen;
    std::string name;
    std::string action;
  };
  std::vector<chore> chores;
  {
    pqxx::nontransaction tx(*conn_, "aw_lane_partition_chores");
    for (const auto& row : run(tx, "aw_lane_partition_chores",
                               retention.count() / 1000.0))
      chores.push_back({row["gen"].as<int>(), row["name"].as<std::string>(),
                        row["action"].as<std::string>()});
  }
  // DETACH ... CONCURRENTLY cannot run in a transaction block. The names
  // come from the function above (job_rows_lane_N), never from input.
  if (chores.empty())
    return done;
  pqxx::nontransaction tx(*conn_, "aw_lane_partition");
  tx.exec_params("SELECT set_config('lock_timeout', $1, false)", lock_timeout);
  // The connection goes on to cleanups and vacuums: no timeout for those.
  auto reset = [&] { tx.exec("SELECT set_config('lock_timeout', '0', false)"); };
  for (auto& c : chores) {
    const auto table = conn_->quote_name(c.name);
    try {
      if (c.action == "finalize")
        tx.exec("ALTER TABLE job_rows DETACH PARTITION " + table
                + " FINALIZE");
      else if (c.action == "detach")
        tx.exec("ALTER TABLE job_rows DETACH PARTITION " + table
                + " CONCURRENTLY");
      tx.exec("DROP TABLE " + table);
      run(tx, "aw_lane_generation_gone", c.gen);
      done.push_back("dropped lane partition " + c.name);
    } catch (const pqxx::sql_error& e) {
      reset();
      if (!timed_out(e))
        throw;
      // An interrupted detach is finalized next round.
      done.push_back("lane partition " + c.name
                     + ": waited past its lock timeout");
      return done;
    }
  }
  reset();
  return done;
}

std::vector<std::string> job_store::vacuum(int64_t min_dead, double share) {
  connect();
  std::vector<std::string> due = maintain_lane_partitions();
  std::vector<std::string> vacuumed;
  {
    pqxx::nontransaction tx(*conn_, "aw_dead_tuples");
    for (const auto& row : run(tx, "aw_dead_tuples")) {
      auto dead = row["n_dead_tup"].as<int64_t>();
      auto live = row["n_live_tup"].as<int64_t>();
      if (dead >= min_dead
          && static_cast<double>(dead) >= share * static_cast<double>(live))
        vacuumed.push_back(row["relname"].as<std::string>());
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
