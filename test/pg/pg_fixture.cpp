#include "pg_fixture.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>
#include <sys/wait.h>

#include <boost/test/unit_test.hpp>

#include "actor_worker/storage/migrations.hpp"

namespace aw::test {

std::string server_url() {
  auto env = std::getenv("AW_TEST_DATABASE_URL");
  if (env == nullptr || *env == '\0')
    BOOST_FAIL("AW_TEST_DATABASE_URL is not set: run the database tests "
               "through ctest, which starts a throwaway PostgreSQL");
  return env;
}

std::string with_database(const std::string& url, const std::string& dbname) {
  auto slash = url.rfind('/');
  return url.substr(0, slash + 1) + dbname;
}

std::string binary_path() {
  auto env = std::getenv("AW_BINARY");
  if (env == nullptr || *env == '\0')
    BOOST_FAIL("AW_BINARY is not set: run the database tests through ctest");
  return env;
}

fresh_database::fresh_database(bool migrated) {
  static std::atomic<int> counter{0};
  name = "aw_test_" + std::to_string(::getpid()) + "_"
         + std::to_string(counter++);
  {
    pqxx::connection admin{server_url()};
    pqxx::nontransaction tx{admin};
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name) + " WITH (FORCE)");
    tx.exec("CREATE DATABASE " + tx.quote_name(name));
  }
  url = with_database(server_url(), name);
  if (migrated)
    storage::migrate(url);
}

fresh_database::~fresh_database() {
  try {
    pqxx::connection admin{server_url()};
    pqxx::nontransaction tx{admin};
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name) + " WITH (FORCE)");
  } catch (const std::exception& e) {
    BOOST_TEST_MESSAGE("dropping " << name << " failed: " << e.what());
  }
}

std::unique_ptr<pqxx::connection> fresh_database::connect() const {
  return std::make_unique<pqxx::connection>(url);
}

int64_t fresh_database::scalar(const std::string& sql) const {
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec1(sql);
  return row[0].is_null() ? 0 : row[0].as<int64_t>();
}

void fresh_database::exec(const std::string& sql) const {
  pqxx::connection conn{url};
  pqxx::nontransaction tx{conn};
  tx.exec(sql);
}

runtime_config fresh_database::config(int concurrency) const {
  runtime_config cfg;
  cfg.database.url = url;
  cfg.worker.node = "test";
  cfg.worker.poll_interval = std::chrono::milliseconds{100};
  cfg.worker.shutdown_drain = std::chrono::milliseconds{500};
  queue_config q;
  q.concurrency = concurrency;
  cfg.queues.push_back(q);
  cfg.validate();
  return cfg;
}

bool wait_until(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

} // namespace

command_result run_binary(const std::string& args,
                          const std::string& database_url) {
  static std::atomic<int> counter{0};
  auto base = "/tmp/aw_cmd_" + std::to_string(::getpid()) + "_"
              + std::to_string(counter++);
  std::string cmd = "DATABASE_URL='" + database_url + "' " + binary_path()
                    + " " + args + " >" + base + ".out 2>" + base + ".err";
  int status = std::system(cmd.c_str());
  command_result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

} // namespace aw::test
