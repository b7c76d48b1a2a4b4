#pragma once
// Small helpers shared by the pg suites that need no actors: a session on one
// persistent connection (for polling loops, where opening a connection per
// check would dominate the run time) and a few string checks.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/storage/job_store.hpp"

namespace aw::test {

/// The outcome `kind` of the run of job `id` among `claimed` (its batch and
/// attempt identify the run).
inline aw::job_outcome outcome(const std::vector<aw::claimed_job>& claimed,
                               int64_t id, aw::outcome_kind kind,
                               std::string message = {}) {
  aw::job_outcome o;
  o.job_id = id;
  o.kind = kind;
  o.message = std::move(message);
  for (auto& j : claimed)
    if (j.id == id) {
      o.batch_id = j.batch_id;
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

/// store.claim(), repeated while the lanes' commit-order fence holds due jobs
/// back. The fence is cluster-wide: a transaction open in another suite's
/// database (ctest runs suites in parallel on one server) can hold this
/// database's newest jobs back for up to fence_wait, so a test that expects
/// "everything due" claims through here. Tests of the fence itself call
/// claim() directly.
inline aw::claim_result claim_settled(aw::storage::job_store& store,
                                      const std::string& queue, int limit,
                                      int64_t max_bytes = int64_t{1} << 40) {
  auto result = store.claim(queue, limit, max_bytes);
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (result.more_soon && !result.byte_bound
         && static_cast<int>(result.jobs.size()) < limit
         && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    int64_t used = 0;
    for (auto& j : result.jobs)
      used += static_cast<int64_t>(j.bytes());
    if (!result.jobs.empty() && used >= max_bytes)
      break;
    auto more = store.claim(queue, limit - static_cast<int>(result.jobs.size()),
                            result.jobs.empty() ? max_bytes : max_bytes - used);
    for (auto& j : more.jobs)
      result.jobs.push_back(std::move(j));
    // Every retry's report of jobs set aside counts, merged by kind and
    // priority.
    for (auto& s : more.set_aside) {
      auto same = std::find_if(
        result.set_aside.begin(), result.set_aside.end(), [&](auto& x) {
          return x.kind == s.kind && x.priority == s.priority;
        });
      if (same == result.set_aside.end())
        result.set_aside.push_back(std::move(s));
      else
        same->count += s.count;
    }
    result.more_soon = more.more_soon;
    result.byte_bound = more.byte_bound;
  }
  return result;
}

/// One connection, one autocommit statement per call.
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
