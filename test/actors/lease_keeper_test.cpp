// Deterministic tests of the lease keeper and the watchdog: a real poller
// and real executors, stub storage, virtual time.

#include "actor_fixture.hpp"

#include "actor_worker/actors/lease_keeper.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

struct lease_fixture : fixture {
  lease_keeper_actor keeper;

  /// A lease keeper with a 1 s heartbeat and a 3 s reclaim window, keeping
  /// `p`'s jobs alive.
  void spawn_keeper(poller_actor p) {
    lease_keeper_config lc{1s, 3s, storage};
    keeper = sys->spawn(aw::lease_keeper_behavior, lc);
    spawned.push_back(caf::actor_cast<caf::actor>(keeper));
    caf::anon_send(keeper, pollers_atom::value, std::vector<poller_actor>{p});
    run();
  }

  bool cancelled(size_t i) const {
    return dispatcher->tokens.at(i).cancelled();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(lease_keeper_test, lease_fixture)

BOOST_AUTO_TEST_CASE(heartbeat_refreshes_every_running_job_in_one_statement) {
  script->backlog = 5;
  auto p = spawn_poller(5);
  run();
  spawn_keeper(p);
  BOOST_TEST(script->heartbeats.empty());
  advance(1s);
  BOOST_REQUIRE_EQUAL(script->heartbeats.size(), 1u);
  auto ids = script->heartbeats.front();
  std::sort(ids.begin(), ids.end());
  BOOST_TEST(ids == (std::vector<int64_t>{1, 2, 3, 4, 5}),
             boost::test_tools::per_element());
  // Finished jobs drop out of the next heartbeat.
  dispatcher->complete(2);
  run();
  advance(1s);
  BOOST_REQUIRE_EQUAL(script->heartbeats.size(), 2u);
  BOOST_TEST(script->heartbeats.back().size() == 3u);
}

BOOST_AUTO_TEST_CASE(every_round_refreshes_the_node_row_busy_or_idle) {
  script->backlog = 3;
  auto p = spawn_poller(3);
  run();
  spawn_keeper(p);
  // At once: the process is in worker_nodes from its start.
  BOOST_REQUIRE_EQUAL(script->node_refreshes.size(), 1u);
  advance(1s);
  // Busy: the row says how many jobs this process holds.
  BOOST_REQUIRE_EQUAL(script->node_refreshes.size(), 2u);
  BOOST_TEST(script->node_refreshes.back() == 3);
  for (int i = 1; i <= 3; ++i)
    dispatcher->complete(i);
  run();
  advance(1s);
  advance(1s);
  // Idle: still refreshed every round, so the node stays alive.
  BOOST_REQUIRE_EQUAL(script->node_refreshes.size(), 4u);
  BOOST_TEST(script->node_refreshes.back() == 0);
}

BOOST_AUTO_TEST_CASE(lost_lease_cancels_the_run_and_records_nothing) {
  script->backlog = 3;
  auto p = spawn_poller(3, 1s, 2s);
  run();
  spawn_keeper(p);
  script->stolen = {2}; // reclaimed by another worker meanwhile
  advance(1s);
  BOOST_TEST(!cancelled(0));
  BOOST_TEST(cancelled(1));
  BOOST_TEST(!cancelled(2));
  BOOST_TEST(dispatcher->tokens[1].reason().find("lease lost")
             != std::string::npos);
  // The handlers return: only the two jobs still ours are recorded.
  dispatcher->complete(3);
  run();
  BOOST_TEST(script->finished.size() == 2u);
  BOOST_TEST(std::count(script->finished.begin(), script->finished.end(), 2)
             == 0);
  // The freed slots are claimed again.
  BOOST_TEST(script->claim_limits.back() == 3);
}

BOOST_AUTO_TEST_CASE(lost_job_is_not_released_at_shutdown) {
  script->backlog = 2;
  auto p = spawn_poller(2, 1s, 1s);
  run();
  spawn_keeper(p);
  script->stolen = {1};
  advance(1s);
  auto client = sys->spawn([p](caf::event_based_actor* self) {
    self->request(p, caf::infinite, drain_atom::value).then([](int64_t) {});
  });
  spawned.push_back(client);
  run();
  advance(1s);
  BOOST_TEST(script->released == (std::vector<int64_t>{2}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(watchdog_abandons_jobs_before_the_reclaim_window_closes) {
  script->backlog = 2;
  auto p = spawn_poller(2);
  run();
  spawn_keeper(p);
  script->fail_heartbeats = true; // the database is gone
  // Reclaim window 3 s, heartbeat 1 s: abandon once the lease is 2 s old,
  // one heartbeat before another node may reclaim the job.
  advance(1s);
  BOOST_TEST(!cancelled(0));
  BOOST_TEST(!cancelled(1));
  advance(1s);
  BOOST_TEST(cancelled(0));
  BOOST_TEST(cancelled(1));
  BOOST_TEST(dispatcher->tokens[0].reason().find("watchdog")
             != std::string::npos);
  // Whatever the handlers return now is not recorded.
  dispatcher->complete(2);
  run();
  BOOST_TEST(script->finished.empty());
}

BOOST_AUTO_TEST_CASE(watchdog_counts_from_the_last_successful_heartbeat) {
  script->backlog = 1;
  auto p = spawn_poller(1);
  run();
  spawn_keeper(p);
  advance(1s); // heartbeat succeeds at t = 1 s
  BOOST_REQUIRE_EQUAL(script->heartbeats.size(), 1u);
  script->fail_heartbeats = true;
  advance(1s); // t = 2 s: lease 1 s old
  advance(1s); // t = 3 s: lease 2 s old -> abandon
  BOOST_TEST(cancelled(0));
}

BOOST_AUTO_TEST_CASE(rescues_are_left_to_maintenance) {
  script->backlog = 1;
  auto p = spawn_poller(1);
  run();
  spawn_keeper(p);
  for (int i = 0; i < 4; ++i)
    advance(1s);
  BOOST_TEST(script->heartbeats.size() == 4u);
  BOOST_TEST(script->rescues == 0);
}

BOOST_AUTO_TEST_SUITE_END()
