// Hooks are isolated from each other and from job execution: a throwing
// hook is logged and the next one still runs; a slow hook delays neither
// completions nor shutdown.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "log_capture.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"
#include "lifecycle_helpers.hpp"

using namespace std::chrono_literals;
using aw::event_type;
using aw::test::contains;

namespace {

using aw::test::log_capture;

constexpr auto patience = std::chrono::seconds{60};

struct customer_args {
  std::string customer;
};

void from_json(const nlohmann::json& j, customer_args& a) {
  j.at("customer").get_to(a.customer);
}

} // namespace

BOOST_AUTO_TEST_SUITE(hook_isolation_test)

BOOST_AUTO_TEST_CASE(throwing_hook_is_logged_and_the_next_hook_of_the_kind_still_runs) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  log_capture captured;
  aw::test::event_log log;
  std::atomic<int> typed_calls{0};
  std::mutex order_mtx;
  std::vector<std::string> order;
  auto mark = [&](const std::string& who) {
    return [&order_mtx, &order, who](const aw::event& e) {
      std::lock_guard<std::mutex> guard{order_mtx};
      order.push_back(who + " " + aw::to_string(e.type) + " "
                      + std::to_string(e.job_id()));
    };
  };
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("k", [](const nlohmann::json&, const aw::job_context&) {});
  // #1 throws a std::exception, #2 something else, #3 is a typed hook whose
  // args do not parse (skipped, logged); #4 must still see every event.
  // #5 and #6 show that the stack runs in registration order, per event.
  reg->on_event_kind("k", [](const aw::event&) {
    throw std::runtime_error("hook exploded");
  });
  reg->on_event_kind("k", [](const aw::event&) { throw 7; });
  reg->on_event<customer_args>("k", [&](const aw::typed_event<customer_args>&) {
    ++typed_calls;
  });
  reg->on_event_kind("k", log.hook());
  reg->on_event_kind("k", mark("first"));
  reg->on_event_kind("k", mark("second"));
  const int n = 5;
  std::vector<int64_t> ids;
  {
    aw::test::worker_node node{db.config(4), std::move(reg)};
    for (int i = 0; i < n; ++i)
      ids.push_back(aw::test::enqueue_one(db, "k", {{"i", i}}));
    BOOST_REQUIRE(log.wait_for_total(event_type::completed, n, patience));
    BOOST_REQUIRE(log.wait_for_total(event_type::started, n, patience));
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        std::lock_guard<std::mutex> guard{order_mtx};
        return order.size() == 4u * n;
      },
      patience));
  }
  // Each event ran through the whole stack before the next event began.
  for (size_t i = 0; i + 1 < order.size(); i += 2) {
    BOOST_TEST(order[i].rfind("first ", 0) == 0);
    BOOST_TEST(order[i + 1] == "second " + order[i].substr(6));
  }
  for (auto id : ids)
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_TEST(log.count(id, event_type::started) == 1u);
      BOOST_TEST(log.count(id, event_type::completed) == 1u);
      BOOST_TEST(s.text("SELECT state" + aw::test::job_where(id)) == "completed");
      auto job = std::to_string(id);
      BOOST_TEST(captured.has("hook #1 of kind 'k' threw on completed of job " + job
                              + ": hook exploded"));
      BOOST_TEST(captured.has("hook #1 of kind 'k' threw on started of job " + job
                              + ": hook exploded"));
      BOOST_TEST(captured.has("hook #2 of kind 'k' threw a non-standard exception "
                              "on completed of job "
                              + job));
      BOOST_TEST(captured.has("hook #3 of kind 'k' threw on completed of job " + job));
    }
  BOOST_TEST(typed_calls.load() == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(slow_hook_delays_neither_completions_nor_shutdown) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  const int n = 200;
  std::mutex mtx;
  std::condition_variable cv;
  bool released = false;
  std::atomic<int> handled{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("quick", [](const nlohmann::json&, const aw::job_context&) {});
  // 2 s per event (400 events: 13 minutes) until the test releases it.
  reg->on_event_kind("quick", [&](const aw::event&) {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait_for(guard, 2s, [&] { return released; });
    ++handled;
  });
  auto release = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    released = true;
    cv.notify_all();
  };
  struct releaser {
    std::function<void()> fn;
    ~releaser() {
      fn();
    }
  };
  {
    aw::test::worker_node node{db.config(10), std::move(reg)};
    // Declared after the node, so it releases the hook before the node's
    // teardown waits for the registry.
    releaser guard{release};
    std::vector<aw::enqueue_request> requests(n, aw::enqueue_request{"quick", {}, {}});
    auto t0 = std::chrono::steady_clock::now();
    aw::test::enqueue_all(db, requests);
    auto all_done = aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == n;
      },
      15s);
    auto took = std::chrono::steady_clock::now() - t0;
    auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
    BOOST_TEST_MESSAGE(n << " jobs completed in " << took_ms << " ms; the hook "
                         << "handled " << handled.load() << " of " << 2 * n
                         << " events meanwhile");
    BOOST_REQUIRE_MESSAGE(all_done,
                          s.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                                   "'completed'")
                            << " of " << n << " completed within 15 s");
    // The hook is still working through its backlog: at most one event per
    // 2 s (plus the one in progress) since the start.
    BOOST_TEST(handled.load() <= took_ms / 2000 + 1);
    BOOST_TEST(handled.load() < 2 * n);
    // Shutdown does not wait for the hooks' backlog either.
    auto t1 = std::chrono::steady_clock::now();
    node.rt().stop();
    auto stop_took = std::chrono::steady_clock::now() - t1;
    BOOST_TEST((stop_took < 5s), "stop() took "
                                   << std::chrono::duration_cast<std::chrono::milliseconds>(
                                        stop_took)
                                        .count()
                                   << " ms");
    BOOST_TEST(handled.load() < 2 * n);
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed' "
                      "AND attempt = 1")
             == n);
}

BOOST_AUTO_TEST_SUITE_END()
