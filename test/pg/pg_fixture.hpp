#pragma once
// Fixtures for tests against a real PostgreSQL. The server comes from the
// ctest fixture `pg_server` (scripts/pg.sh), its URL from
// AW_TEST_DATABASE_URL. Every test case gets a fresh, migrated database of
// its own and drops it afterwards, so suites can run in parallel.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <pqxx/pqxx>

#include "actor_worker/config/config.hpp"

namespace aw::test {

/// The server URL; fails the test when AW_TEST_DATABASE_URL is unset.
std::string server_url();

/// `url` with its database name replaced by `dbname`.
std::string with_database(const std::string& url, const std::string& dbname);

/// The actor-worker binary under test (AW_BINARY).
std::string binary_path();

/// A fresh database, migrated unless told otherwise, dropped at the end.
struct fresh_database {
  explicit fresh_database(bool migrated = true);
  ~fresh_database();

  std::string name;
  std::string url;

  /// A new connection to this database.
  std::unique_ptr<pqxx::connection> connect() const;

  /// Runs `sql` and returns the first column of the first row as int64.
  int64_t scalar(const std::string& sql) const;

  /// Runs `sql` (no result expected).
  void exec(const std::string& sql) const;

  /// A runtime config for this database with short, test-friendly timings.
  runtime_config config(int concurrency = 10) const;
};

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
/// Returns whether it held.
bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout);

/// Runs the actor-worker binary with `args` (a shell word list), returns
/// its exit code and captures stdout / stderr.
struct command_result {
  int exit_code;
  std::string out;
  std::string err;
};
command_result run_binary(const std::string& args,
                          const std::string& database_url);

} // namespace aw::test
