#pragma once
// Small helpers shared by the pg suites that need no actors: a session on one
// persistent connection (for polling loops, where opening a connection per
// check would dominate the run time) and a few string checks.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/storage/job_store.hpp"

namespace aw::test {

/// The outcome `kind` of the run of job `id` among `claimed` (its lease
/// identifies the run).
inline aw::job_outcome outcome(const std::vector<aw::claimed_job>& claimed,
                               int64_t id, aw::outcome_kind kind,
                               std::string message = {}) {
  aw::job_outcome o;
  o.job_id = id;
  o.kind = kind;
  o.message = std::move(message);
  for (auto& j : claimed)
    if (j.id == id) {
      o.lease = j.lease;
      o.attempt = j.attempt;
    }
  return o;
}

/// The outcome of `job`'s run.
inline aw::job_outcome outcome(const aw::claimed_job& job,
                               aw::outcome_kind kind,
                               std::string message = {}) {
  return outcome(std::vector<aw::claimed_job>{job}, job.id, kind,
                 std::move(message));
}

/// The ids of `jobs`, in their order.
inline std::vector<int64_t> ids_of(const std::vector<aw::claimed_job>& jobs) {
  std::vector<int64_t> ids;
  for (auto& j : jobs)
    ids.push_back(j.id);
  return ids;
}

/// The finish_result of each report (what most tests compare).
inline std::vector<aw::finish_result>
results(const std::vector<aw::storage::finish_report>& reports) {
  std::vector<aw::finish_result> out;
  for (auto& r : reports)
    out.push_back(r.result);
  return out;
}

/// One connection, one autocommit statement per call.
/// Stops a helper thread of a test (sets `stop`, joins `t`) when it goes
/// out of scope, also when a check fails and throws.
struct thread_joiner {
  std::atomic<bool>& stop;
  std::thread& t;
  ~thread_joiner() {
    stop = true;
    if (t.joinable())
      t.join();
  }
};

struct db_session {
  explicit db_session(const std::string& url) : conn(url) {
  }

  /// First column of the first row as int64 (0 when NULL).
  int64_t scalar(const std::string& sql) {
    pqxx::nontransaction tx{conn};
    auto row = tx.exec1(sql);
    return row[0].is_null() ? 0 : row[0].as<int64_t>();
  }

  /// First column of the first row as text ("" when NULL).
  std::string text(const std::string& sql) {
    pqxx::nontransaction tx{conn};
    auto row = tx.exec1(sql);
    return row[0].is_null() ? std::string{} : row[0].as<std::string>();
  }

  /// First column of the first row as bool.
  bool check(const std::string& sql) {
    pqxx::nontransaction tx{conn};
    return tx.exec1(sql)[0].as<bool>();
  }

  pqxx::result query(const std::string& sql) {
    pqxx::nontransaction tx{conn};
    return tx.exec(sql);
  }

  void exec(const std::string& sql) {
    pqxx::nontransaction tx{conn};
    tx.exec(sql);
  }

  /// The column names of `table`, as the database has them.
  std::set<std::string> columns_of(const std::string& table) {
    pqxx::nontransaction tx{conn};
    auto rows = tx.exec_params("SELECT column_name FROM information_schema.columns "
                               "WHERE table_schema = current_schema() "
                               "AND table_name = $1",
                               table);
    std::set<std::string> out;
    for (const auto& row : rows)
      out.insert(row[0].as<std::string>());
    return out;
  }

  pqxx::connection conn;
};

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace aw::test
