// job_store's maintenance and cluster statements: cleanup of expired
// rows, the node's row and the leader lease, queue controls, cancel
// requests, queue samples, the lane ring and vacuum. Split from
// storage/job_store.cpp.

#include "actor_worker/storage/job_store.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <unistd.h>

#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/config/lease.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/storage/internal/job_store_parts.hpp"
#include "actor_worker/storage/queue_samples.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

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
