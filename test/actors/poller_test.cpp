// Deterministic tests of the poller on CAF's test coordinator: virtual
// time, a stub storage actor that records what it is asked, and a job
// dispatcher the test completes by hand.

#include "actor_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

BOOST_FIXTURE_TEST_SUITE(poller_test, fixture)

BOOST_AUTO_TEST_CASE(claim_never_exceeds_free_slots) {
  script->backlog = 100;
  spawn_poller(8);
  run();
  BOOST_TEST(running() == 8u);
  BOOST_TEST(script->claim_limits.front() == 8);
  // Finishing 3 jobs frees exactly 3 slots; the next claim asks for 3.
  dispatcher->complete(3);
  run();
  BOOST_TEST(running() == 8u);
  BOOST_TEST(script->claim_limits.back() == 3);
  // Across many rounds no claim ever asks for more than is free, and the
  // number running never exceeds the concurrency.
  for (int round = 0; round < 30 && script->backlog > 0; ++round) {
    dispatcher->complete(1 + round % 8);
    run();
    BOOST_TEST(running() <= 8u);
  }
  for (auto limit : script->claim_limits)
    BOOST_TEST(limit <= 8);
  BOOST_TEST(script->claim_limits.size() > 5u);
}

BOOST_AUTO_TEST_CASE(finished_burst_becomes_one_claim) {
  script->backlog = 100;
  spawn_poller(10);
  run();
  auto claims_before = script->claim_limits.size();
  // Ten jobs finish at once: their slots are claimed in one statement.
  dispatcher->complete(10);
  run();
  BOOST_TEST(script->claim_limits.size() == claims_before + 1);
  BOOST_TEST(script->claim_limits.back() == 10);
}

BOOST_AUTO_TEST_CASE(idle_poller_claims_every_poll_interval) {
  spawn_poller(4, 1s);
  run();
  BOOST_REQUIRE_EQUAL(script->claim_limits.size(), 1u);
  auto start = now();
  // Nothing due: nothing happens until the interval passes.
  advance(999ms);
  BOOST_TEST(script->claim_limits.size() == 1u);
  advance(1ms);
  BOOST_TEST(script->claim_limits.size() == 2u);
  for (int i = 0; i < 5; ++i)
    advance(1s);
  BOOST_REQUIRE_EQUAL(script->claim_limits.size(), 7u);
  for (size_t i = 0; i < script->claim_times.size(); ++i)
    BOOST_TEST((script->claim_times[i] - start == std::chrono::seconds(i)));
  // A job enqueued meanwhile is picked up on the next interval...
  script->backlog = 1;
  advance(1s);
  BOOST_TEST(running() == 1u);
}

BOOST_AUTO_TEST_CASE(wake_claims_at_once_without_waiting_for_the_interval) {
  auto p = spawn_poller(4, 1s);
  run();
  script->backlog = 3;
  caf::anon_send(p, wake_atom::value);
  run();
  BOOST_TEST(running() == 3u);
  BOOST_TEST(script->claim_limits.size() == 2u);
}

BOOST_AUTO_TEST_CASE(loop_errors_back_off_1_2_4_to_30s_and_reset) {
  script->fail_claims = true;
  auto p = spawn_poller(4, 1s);
  run();
  BOOST_REQUIRE_EQUAL(script->claim_limits.size(), 1u);
  // Each failed claim waits twice as long as the one before, capped at 30 s.
  std::vector<long> expected{1, 2, 4, 8, 16, 30, 30, 30};
  for (auto secs : expected) {
    auto count = script->claim_limits.size();
    advance(std::chrono::seconds(secs) - 1ms);
    BOOST_TEST(script->claim_limits.size() == count,
               "claimed before the " << secs << " s backoff ran out");
    advance(1ms);
    BOOST_TEST(script->claim_limits.size() == count + 1,
               "no claim after the " << secs << " s backoff");
  }
  // A wake-up during a backoff does not bypass it.
  auto count = script->claim_limits.size();
  caf::anon_send(p, wake_atom::value);
  run();
  BOOST_TEST(script->claim_limits.size() == count);
  // The database is back: the next claim succeeds and resets the backoff.
  script->fail_claims = false;
  advance(30s);
  BOOST_TEST(script->claim_limits.size() == count + 1);
  script->fail_claims = true;
  advance(1s); // idle interval after the success: this claim fails
  count = script->claim_limits.size();
  advance(1s); // and the first backoff is 1 s again
  BOOST_TEST(script->claim_limits.size() == count + 1);
}

BOOST_AUTO_TEST_CASE(drain_waits_the_budget_then_releases_the_rest) {
  script->backlog = 5;
  auto p = spawn_poller(5, 1s, 2s);
  run();
  BOOST_REQUIRE_EQUAL(running(), 5u);
  auto claims = script->claim_limits.size();
  std::shared_ptr<int64_t> released = std::make_shared<int64_t>(-1);
  auto client = sys->spawn([p, released](caf::event_based_actor* self) {
    self->request(p, caf::infinite, drain_atom::value)
      .then([released](int64_t n) { *released = n; });
  });
  spawned.push_back(client);
  run();
  // Two jobs finish inside the budget: their outcomes are recorded.
  advance(1s);
  dispatcher->complete(2);
  run();
  BOOST_TEST(*released == -1);
  BOOST_TEST(script->finished.size() == 2u);
  // Draining claims nothing, not even on the idle interval.
  BOOST_TEST(script->claim_limits.size() == claims);
  // The budget runs out: the three still running are released.
  advance(1s);
  BOOST_TEST(*released == 3);
  BOOST_TEST(script->released.size() == 3u);
  BOOST_TEST(script->claim_limits.size() == claims);
  // A handler that returns after its job was released changes nothing.
  dispatcher->complete(3);
  run();
  BOOST_TEST(script->finished.size() == 2u);
}

BOOST_AUTO_TEST_CASE(drain_ends_early_when_every_job_finished) {
  script->backlog = 2;
  auto p = spawn_poller(4, 1s, 10s);
  run();
  std::shared_ptr<int64_t> released = std::make_shared<int64_t>(-1);
  auto client = sys->spawn([p, released](caf::event_based_actor* self) {
    self->request(p, caf::infinite, drain_atom::value)
      .then([released](int64_t n) { *released = n; });
  });
  spawned.push_back(client);
  run();
  dispatcher->complete(2);
  run();
  BOOST_TEST(*released == 0);
  BOOST_TEST(script->released.empty());
}

BOOST_AUTO_TEST_SUITE_END()
