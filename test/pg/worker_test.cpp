// In-process aw::runtime nodes against a real database: exactly-once
// execution across nodes, graceful shutdown, the schema check, an
// unreachable database, typed handlers and completed-row retention.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/messages/error.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "refusing_port.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;
using aw::test::contains;

namespace {

constexpr auto patience = std::chrono::seconds{60};

std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db,
                               const std::string& kind, int n,
                               const nlohmann::json& args = nlohmann::json::object()) {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests) {
    r.kind = kind;
    r.args = args;
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

/// Handlers block here until the test opens the gate (or a deadline
/// passes); the test sees how many have started.
struct gate {
  std::mutex mtx;
  std::condition_variable cv;
  bool open = false;
  int started = 0;

  void pass(std::chrono::milliseconds max_wait) {
    std::unique_lock<std::mutex> guard{mtx};
    ++started;
    cv.wait_for(guard, max_wait, [this] { return open; });
  }

  void release() {
    std::lock_guard<std::mutex> guard{mtx};
    open = true;
    cv.notify_all();
  }

  int started_count() {
    std::lock_guard<std::mutex> guard{mtx};
    return started;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(worker_test)

BOOST_AUTO_TEST_CASE(four_workers_run_each_of_10000_jobs_exactly_once) {
  aw::test::fresh_database db;
  const int n = 10000;
  std::mutex mtx;
  std::map<int64_t, int> executions;
  std::atomic<int> total{0};
  auto make_registry = [&] {
    auto reg = std::make_shared<aw::registry>();
    reg->add_raw("record", [&](const nlohmann::json&, const aw::job_context& ctx) {
      {
        std::lock_guard<std::mutex> guard{mtx};
        ++executions[ctx.id];
      }
      ++total;
    });
    return reg;
  };
  aw::test::db_session s{db.url};
  {
    std::vector<std::unique_ptr<aw::test::worker_node>> nodes;
    for (int i = 0; i < 4; ++i) {
      auto cfg = db.config(16);
      cfg.worker.node = "node" + std::to_string(i);
      nodes.push_back(
        std::make_unique<aw::test::worker_node>(cfg, make_registry()));
    }
    // Enqueued while the nodes run, so they race for the same burst.
    auto ids = enqueue_n(db, "record", n);
    BOOST_REQUIRE_EQUAL(ids.size(), static_cast<size_t>(n));
    auto done = aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
               == n;
      },
      std::chrono::seconds{150});
    BOOST_REQUIRE_MESSAGE(done, "only "
                                  << s.scalar("SELECT count(*) FROM jobs_live "
                                              "WHERE state = 'completed'")
                                  << " of " << n << " jobs completed");
    for (auto& node : nodes)
      BOOST_TEST(node->rt().stop().released == 0);
  }
  BOOST_TEST(total.load() == n);
  BOOST_TEST(executions.size() == static_cast<size_t>(n));
  int twice = 0;
  for (auto& [id, count] : executions)
    twice += count != 1;
  BOOST_TEST(twice == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE attempt = 1 "
                      "AND error_count = 0")
             == n);
  // Every node did some of the work.
  BOOST_TEST(s.scalar("SELECT count(DISTINCT split_part(locked_by, ':', 1)) "
                      "FROM jobs_live")
             == 4);
}

BOOST_AUTO_TEST_CASE(stop_waits_for_handlers_that_return_late_and_reports_none_abandoned) {
  // Handlers that overrun the drain but return within stop's handler wait:
  // stop() returns after them, so nothing of theirs outlives it.
  aw::test::fresh_database db;
  std::atomic<int> started{0};
  std::atomic<int> returned{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("slow", [&](const nlohmann::json&, const aw::job_context&) {
    ++started;
    std::this_thread::sleep_for(800ms); // ignores its cancellation
    ++returned;
  });
  enqueue_n(db, "slow", 2);
  auto cfg = db.config(2);
  cfg.worker.shutdown_drain = 100ms;
  aw::test::worker_node node{cfg, reg};
  BOOST_REQUIRE(aw::test::wait_until([&] { return started.load() == 2; },
                                     patience));
  auto report = node.rt().stop(10s);
  BOOST_TEST(report.released == 2);
  BOOST_TEST(report.abandoned == 0);
  BOOST_TEST(returned.load() == 2);
}

BOOST_AUTO_TEST_CASE(stop_releases_running_jobs_without_charging_an_attempt) {
  aw::test::fresh_database db;
  gate g;
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("block", [&](const nlohmann::json&, const aw::job_context&) {
    g.pass(5s);
  });
  auto ids = enqueue_n(db, "block", 3);
  aw::test::db_session s{db.url};
  {
    auto cfg = db.config(3);
    cfg.worker.shutdown_drain = 500ms;
    aw::test::worker_node node{cfg, reg};
    reg.reset(); // the node owns the registry
    BOOST_REQUIRE(aw::test::wait_until([&] { return g.started_count() == 3; },
                                       patience));
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'") == 3);
    auto t0 = std::chrono::steady_clock::now();
    auto report = node.rt().stop(200ms);
    auto took = std::chrono::steady_clock::now() - t0;
    BOOST_TEST(report.released == 3);
    // They ignore their cancellation: still running when stop() returned.
    BOOST_TEST(report.abandoned == 3);
    BOOST_TEST_MESSAGE("stop() took "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                       << " ms");
    // The drain budget is 500 ms, the handler wait 200 ms; the handlers
    // would block for 5 s.
    BOOST_TEST((took < 3s));
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                        "AND error_count = 0 AND locked_by IS NULL "
                        "AND locked_at IS NULL AND last_error_message IS NULL")
               == 3);
    g.release(); // let the abandoned handlers return before teardown
  }
  // The abandoned handlers returning afterwards changed nothing.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                      "AND error_count = 0")
             == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(job_finishing_within_the_drain_budget_records_its_outcome) {
  aw::test::fresh_database db;
  gate g;
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("short", [&](const nlohmann::json&, const aw::job_context&) {
    g.pass(30s);
    std::this_thread::sleep_for(200ms); // still busy when stop() begins
  });
  auto ids = enqueue_n(db, "short", 2);
  aw::test::db_session s{db.url};
  {
    auto cfg = db.config(2);
    cfg.worker.shutdown_drain = 10s;
    aw::test::worker_node node{cfg, reg};
    reg.reset();
    BOOST_REQUIRE(aw::test::wait_until([&] { return g.started_count() == 2; },
                                       patience));
    g.release();
    auto t0 = std::chrono::steady_clock::now();
    BOOST_TEST(node.rt().stop().released == 0);
    // It returned once the jobs finished, not after the whole budget.
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 8s));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed' "
                      "AND finalized_at IS NOT NULL AND attempt = 1")
             == 2);
}

BOOST_AUTO_TEST_CASE(missing_column_stops_the_node_with_an_error_naming_it) {
  aw::test::fresh_database db;
  db.exec("ALTER TABLE jobs_in DROP COLUMN metadata CASCADE");
  auto reg = std::make_shared<aw::registry>();
  aw::test::worker_node node{db.config(), reg};
  reg.reset();
  auto ended = node.rt().wait_for(patience);
  BOOST_REQUIRE(ended.has_value());
  BOOST_REQUIRE(static_cast<bool>(*ended));
  auto text = aw::render(*ended);
  BOOST_TEST_MESSAGE("error: " << text);
  BOOST_TEST(contains(text, "schema_outdated"));
  BOOST_TEST(contains(text, "table jobs_in is missing column metadata"));
  BOOST_TEST(contains(text, "run `actor-worker migrate`"));
}

BOOST_AUTO_TEST_CASE(unreachable_database_keeps_the_node_running) {
  aw::test::fresh_database db;
  auto cfg = db.config();
  // Held for the whole test, so no other process can take the port.
  aw::test::refusing_port dead;
  cfg.database.url = "postgresql://postgres@127.0.0.1:"
                     + std::to_string(dead.port()) + "/postgres";
  auto reg = std::make_shared<aw::registry>();
  aw::test::worker_node node{cfg, reg};
  reg.reset();
  // Retrying with backoff, not failed.
  BOOST_TEST(!node.rt().wait_for(2s).has_value());
  // And it still stops cleanly on request.
  BOOST_TEST(node.rt().stop().released == 0);
  auto ended = node.rt().wait_for(patience);
  BOOST_REQUIRE(ended.has_value());
  BOOST_TEST(!*ended, "clean stop, got " << aw::render(*ended));
}

namespace {

struct greeting {
  std::string name;
  int count = 0;
  std::vector<std::string> langs;
};

void from_json(const nlohmann::json& j, greeting& g) {
  j.at("name").get_to(g.name);
  j.at("count").get_to(g.count);
  j.at("langs").get_to(g.langs);
}

} // namespace

BOOST_AUTO_TEST_CASE(typed_handler_gets_its_args_parsed_into_a_struct) {
  aw::test::fresh_database db;
  std::mutex mtx;
  std::vector<std::pair<greeting, aw::job_context>> seen;
  auto reg = std::make_shared<aw::registry>();
  reg->add<greeting>("greet", [&](const greeting& g, const aw::job_context& ctx) {
    std::lock_guard<std::mutex> guard{mtx};
    seen.emplace_back(g, ctx);
  });
  int64_t id;
  {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    aw::insert_options opts;
    opts.metadata = {{"trace", "t-1"}};
    id = aw::enqueue(tx, "greet",
                     {{"name", "Ada"}, {"count", 3}, {"langs", {"en", "fr"}}},
                     opts);
    tx.commit();
  }
  aw::test::db_session s{db.url};
  {
    aw::test::worker_node node{db.config(), reg};
    reg.reset();
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.text("SELECT state FROM jobs_live WHERE id = " + std::to_string(id))
               == "completed";
      },
      patience));
  }
  BOOST_REQUIRE_EQUAL(seen.size(), 1u);
  auto& [g, ctx] = seen.front();
  BOOST_TEST(g.name == "Ada");
  BOOST_TEST(g.count == 3);
  BOOST_TEST(g.langs == (std::vector<std::string>{"en", "fr"}));
  BOOST_TEST(ctx.id == id);
  BOOST_TEST(ctx.kind == "greet");
  BOOST_TEST(ctx.queue == "default");
  BOOST_TEST(ctx.attempt == 1);
  BOOST_TEST(ctx.error_count == 0);
  BOOST_TEST(nlohmann::json::parse(ctx.metadata) == (nlohmann::json{{"trace", "t-1"}}));
}

BOOST_AUTO_TEST_CASE(zero_completed_retention_deletes_rows_at_completion) {
  aw::test::fresh_database db;
  std::atomic<int> runs{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("count", [&](const nlohmann::json&, const aw::job_context&) {
    ++runs;
  });
  enqueue_n(db, "count", 20);
  aw::test::db_session s{db.url};
  {
    auto cfg = db.config();
    cfg.worker.completed_retention = 0ms;
    aw::test::worker_node node{cfg, reg};
    reg.reset();
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return runs.load() == 20 && s.scalar("SELECT count(*) FROM jobs_live") == 0;
      },
      patience));
  }
  BOOST_TEST(runs.load() == 20);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
