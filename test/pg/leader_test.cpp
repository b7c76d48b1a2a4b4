// Leader election on a real PostgreSQL: the lease row of
// migrations/012_leader.sql through job_store (the statements the lease
// keeper runs), then real worker processes electing, handing over at a
// graceful stop through the NOTIFY, and replacing a leader killed with
// SIGKILL within the reclaim window.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "actor_worker/storage/notification_listener.hpp"

#include "cli_process.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "support/recorded_starts.hpp"

using namespace std::chrono_literals;
using aw::storage::job_store;
using aw::test::background_process;
using aw::test::run_bounded;
using aw::test::temp_file;

namespace {

aw::storage::job_store_options store_options(
  const aw::test::fresh_database& db, const std::string& worker_id) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.node = worker_id;
  opts.host = "test";
  opts.version = "test";
  opts.heartbeat_interval = 1s;
  opts.reclaim_window = 3s; // a lease of 2 s
  return opts;
}

job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id) {
  return job_store{store_options(db, worker_id)};
}

std::string node_toml(const std::string& node, const std::string& heartbeat,
                      const std::string& window,
                      const std::string& more_queues = "") {
  return "[worker]\nnode = \"" + node + "\"\nheartbeat_interval = \""
         + heartbeat + "\"\nreclaim_window = \"" + window
         + "\"\n[queues.default]\nconcurrency = 2\n" + more_queues;
}

/// The node names of the processes `actor-worker nodes --json` shows as
/// leader.
std::vector<std::string> leaders(const temp_file& config,
                                 const std::string& url) {
  auto r = run_bounded({"nodes", "--config", config.path, "--json"}, url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "nodes failed: " << r.err);
  std::vector<std::string> out;
  for (auto& n : nlohmann::json::parse(r.out))
    if (n["leader"] == true)
      out.push_back(n["node"].get<std::string>());
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(leader_test)

BOOST_AUTO_TEST_CASE(the_lease_row_elects_one_renews_hands_over_and_expires) {
  aw::test::fresh_database db;
  auto a = make_store(db, "a");
  auto b = make_store(db, "b");
  BOOST_TEST(a.refresh_node(0, true));
  BOOST_TEST(!b.refresh_node(0, true));
  BOOST_TEST(a.refresh_node(3, true)); // renewed
  BOOST_TEST(db.scalar("SELECT count(*) FROM cluster_leader") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM worker_nodes WHERE leader") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM worker_nodes "
                       "WHERE worker_id = 'a' AND leader AND running = 3")
             == 1);
  // A non-candidate (a process that stops) refreshes its row only.
  BOOST_TEST(!b.refresh_node(0, false));
  BOOST_TEST(db.scalar("SELECT count(*) FROM cluster_leader "
                       "WHERE worker_id = 'a'")
             == 1);

  // Resigning: only the holder's resign does anything, and it NOTIFYs.
  aw::storage::notification_listener listener{
    db.url, {aw::defaults::leader_channel}};
  listener.connect();
  BOOST_TEST(!b.resign());
  BOOST_TEST(a.resign());
  BOOST_TEST(db.scalar("SELECT count(*) FROM cluster_leader") == 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM worker_nodes WHERE leader") == 0);
  std::vector<aw::storage::notification> heard;
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      for (auto& n : listener.wait_for(50ms))
        heard.push_back(n);
      return !heard.empty();
    },
    5s));
  BOOST_TEST(heard.front().payload == "a");
  BOOST_TEST(b.refresh_node(0, true)); // takes over at once

  // A lease that expired (its holder was killed) goes to the next
  // candidate; the old holder, back, finds it taken.
  db.exec("UPDATE cluster_leader SET expires_at = now() - interval '1 ms'");
  BOOST_TEST(a.refresh_node(0, true));
  BOOST_TEST(!b.refresh_node(0, true));
  BOOST_TEST(db.scalar("SELECT count(*) FROM worker_nodes WHERE leader") == 1);
  // The lease lasts reclaim_window - heartbeat_interval past a renewal.
  BOOST_TEST(db.scalar("SELECT round(extract(epoch FROM expires_at - "
                       "renewed_at))::bigint FROM cluster_leader")
             == 2);
}

BOOST_AUTO_TEST_CASE(concurrent_candidates_elect_exactly_one) {
  aw::test::fresh_database db;
  std::vector<std::unique_ptr<job_store>> stores;
  for (int i = 0; i < 8; ++i)
    stores.push_back(std::make_unique<job_store>(
      store_options(db, "w" + std::to_string(i))));
  std::vector<std::thread> threads;
  std::atomic<int> won{0};
  for (auto& s : stores)
    threads.emplace_back([&won, store = s.get()] {
      if (store->refresh_node(0, true))
        ++won;
    });
  for (auto& t : threads)
    t.join();
  BOOST_TEST(won.load() == 1);
}

BOOST_AUTO_TEST_CASE(a_stopping_leader_hands_over_at_once_through_notify) {
  aw::test::fresh_database db;
  // Rounds every 10 s: a hand-over within 3 s can only come from the
  // resignation's NOTIFY.
  temp_file a_toml{node_toml("a", "10s", "30s")};
  temp_file b_toml{node_toml("b", "10s", "30s")};
  background_process a{{"run", "--config", a_toml.path}, db.url};
  BOOST_REQUIRE(aw::test::wait_until(
    [&] { return leaders(a_toml, db.url) == std::vector<std::string>{"a"}; },
    30s));
  background_process b{{"run", "--config", b_toml.path}, db.url};
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM worker_nodes WHERE node = 'b'")
             == 1;
    },
    30s));
  BOOST_TEST(leaders(a_toml, db.url) == std::vector<std::string>{"a"},
             boost::test_tools::per_element());
  a.signal(SIGTERM);
  auto stopped = std::chrono::steady_clock::now();
  BOOST_TEST(aw::test::wait_until(
               [&] {
                 return leaders(b_toml, db.url)
                        == std::vector<std::string>{"b"};
               },
               3s),
             "b did not take over within 3 s of a's SIGTERM");
  BOOST_TEST_MESSAGE("hand-over after "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - stopped)
                          .count()
                     << " ms");
  BOOST_REQUIRE(a.wait_exit(30s).value_or(-1) == 0);
  b.signal(SIGTERM);
  BOOST_REQUIRE(b.wait_exit(30s).value_or(-1) == 0);
  // Each said so (the log is read once the process ended and flushed it).
  BOOST_TEST(aw::test::contains(a.err() + a.out(), "now the cluster's leader"));
  BOOST_TEST(aw::test::contains(b.err() + b.out(), "now the cluster's leader"));
  BOOST_TEST(db.scalar("SELECT count(*) FROM cluster_leader") == 0);
}

BOOST_AUTO_TEST_CASE(a_killed_leader_is_replaced_within_the_reclaim_window) {
  aw::test::fresh_database db;
  std::vector<std::unique_ptr<temp_file>> tomls;
  std::vector<std::unique_ptr<background_process>> procs;
  for (auto* name : {"a", "b", "c"}) {
    // Only a serves the queue `slow`, so it surely holds jobs when killed.
    tomls.push_back(std::make_unique<temp_file>(
      node_toml(name, "500ms", "3s",
                std::string{name} == "a" ? "[queues.slow]\nconcurrency = 6\n"
                                         : "")));
    procs.push_back(std::make_unique<background_process>(
      std::vector<std::string>{"run", "--config", tomls.back()->path},
      db.url));
    // One at a time, so the first to start leads.
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return db.scalar(std::string{"SELECT count(*) FROM worker_nodes "
                                     "WHERE node = '"}
                         + name + "'")
               == 1;
      },
      30s));
  }
  auto& config = *tomls.front();
  BOOST_TEST(leaders(config, db.url) == std::vector<std::string>{"a"},
             boost::test_tools::per_element());
  // Jobs held by the leader when it dies are rescued by the next leader's
  // maintenance (only the leader runs it).
  db.exec("INSERT INTO jobs_in (kind, queue, args) SELECT 'sleep', 'slow', "
          "'{\"ms\": 60000}' FROM generate_series(1, 6)");
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      // ...and their handlers' starts recorded (a rescue charges only
      // started jobs).
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' "
                       "AND locked_by LIKE 'a:%'")
               == 6
             && db.scalar(aw::test::recorded_starts_sql) == 6;
    },
    30s));
  procs.front()->signal(SIGKILL);
  procs.front()->wait_exit(10s);
  auto killed = std::chrono::steady_clock::now();
  std::vector<std::string> now_leading;
  BOOST_TEST(aw::test::wait_until(
    [&] {
      now_leading = leaders(config, db.url);
      // Never two at once.
      BOOST_TEST(now_leading.size() <= 1u);
      return now_leading.size() == 1 && now_leading.front() != "a";
    },
    4s)); // the reclaim window (3 s) and a CLI round's slack
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - killed);
  BOOST_TEST_MESSAGE("a new leader after " << took.count() << " ms");
  // The dead leader's jobs are rescued by the new leader's maintenance
  // (charged the lost attempt; nobody else serves `slow`, so they wait).
  BOOST_TEST(aw::test::wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE queue = 'slow' "
                       "AND locked_by IS NULL AND error_count = 1 "
                       "AND state IN ('available', 'scheduled')")
             == 6;
    },
    20s));
}

BOOST_AUTO_TEST_SUITE_END()
