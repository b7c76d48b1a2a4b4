// Deterministic tests of the idle poll gate: many pollers, few permits.

#include "actor_fixture.hpp"

#include "actor_worker/actors/poll_gate.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

struct gate_fixture : fixture {
  std::vector<poller_actor> pollers;

  void spawn_pollers(int count, int permits) {
    auto gate = sys->spawn(aw::poll_gate_behavior, permits);
    spawned.push_back(caf::actor_cast<caf::actor>(gate));
    for (int i = 0; i < count; ++i)
      pollers.push_back(spawn_poller(1, 1s, 2s, gate));
    run();
  }

  size_t claims() const {
    return script->claim_limits.size();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(poll_gate_test, gate_fixture)

BOOST_AUTO_TEST_CASE(hundred_pollers_two_permits_make_at_most_two_idle_claims) {
  spawn_pollers(100, 2);
  // Only the two permit holders looked for work at start...
  BOOST_TEST(claims() == 2u);
  // ...and only they poll on every idle interval.
  for (int i = 0; i < 10; ++i) {
    auto before = claims();
    advance(1s);
    BOOST_TEST(claims() - before <= 2u);
    BOOST_TEST(claims() - before >= 1u);
  }
  BOOST_TEST(claims() <= 22u);
}

BOOST_AUTO_TEST_CASE(burst_of_jobs_is_picked_up_at_once_by_parked_pollers) {
  spawn_pollers(100, 2);
  auto before = claims();
  script->backlog = 100;
  // A NOTIFY wakes every poller of the queue, permit or not: every job is
  // claimed at once (the first pollers buffer a second one each).
  for (auto& p : pollers)
    caf::anon_send(p, wake_atom::value);
  run();
  BOOST_TEST(running() >= 50u);
  BOOST_TEST(script->backlog == 0);
  BOOST_TEST(claims() - before >= 100u);
  // Work finished, everyone idle again: still at most two idle claims per
  // interval (permit holders gave their permits up when they found work).
  while (!dispatcher->held.empty()) {
    dispatcher->complete(dispatcher->held.size());
    run();
  }
  for (int i = 0; i < 5; ++i) {
    auto b = claims();
    advance(1s);
    BOOST_TEST(claims() - b <= 2u);
  }
}

BOOST_AUTO_TEST_CASE(permit_passes_on_when_its_holder_finds_work) {
  spawn_pollers(3, 1);
  BOOST_TEST(claims() == 1u);
  // The holder finds a job: it gives its permit up, the next poller gets it
  // and polls at once.
  script->backlog = 1;
  advance(1s);
  BOOST_TEST(running() == 1u);
  auto after_handover = claims();
  advance(1s);
  BOOST_TEST(claims() - after_handover <= 1u);
}

BOOST_AUTO_TEST_CASE(permits_rotate_so_time_due_jobs_of_parked_queues_run) {
  // Ten queues, two permits, no NOTIFY ever: jobs that become due by time
  // alone (scheduled, backoff, snooze, rescued) on any queue are found
  // within poll_interval x ceil(10 / 2) = 5 s, and the idle polls stay at
  // two per interval.
  auto gate = sys->spawn(aw::poll_gate_behavior, 2);
  spawned.push_back(caf::actor_cast<caf::actor>(gate));
  for (int i = 0; i < 10; ++i) {
    auto name = "q" + std::to_string(i);
    script->queue_backlog[name] = 0;
    spawn_poller(1, 1s, 2s, gate, 1000, int64_t{64} << 20, name);
  }
  run();
  for (int round = 0; round < 3; ++round) {
    // Every queue is polled within five intervals.
    std::set<std::string> polled;
    for (int i = 0; i < 5; ++i) {
      auto before = claims();
      advance(1s);
      BOOST_TEST(claims() - before <= 2u);
      for (auto k = before; k < claims(); ++k)
        polled.insert(script->claim_queues[k]);
    }
    BOOST_TEST(polled.size() == 10u);
  }
  // A job comes due on each queue in turn: each is claimed within five
  // intervals, without a wake-up.
  for (int i = 0; i < 10; ++i) {
    auto name = "q" + std::to_string(i);
    script->queue_backlog[name] = 1;
    for (int s = 0; s < 5 && script->queue_backlog[name] > 0; ++s)
      advance(1s);
    BOOST_TEST(script->queue_backlog[name] == 0, name << "'s job waits");
    dispatcher->complete(dispatcher->held.size());
    run();
  }
}

BOOST_AUTO_TEST_CASE(a_lone_permit_holder_keeps_polling_every_interval) {
  spawn_pollers(1, 2);
  for (int i = 0; i < 5; ++i) {
    auto before = claims();
    advance(1s);
    BOOST_TEST(claims() - before == 1u);
  }
}

BOOST_AUTO_TEST_CASE(without_a_gate_every_poller_polls_idly) {
  for (int i = 0; i < 10; ++i)
    spawn_poller(1, 1s);
  run();
  auto before = claims();
  advance(1s);
  BOOST_TEST(claims() - before == 10u);
}

BOOST_AUTO_TEST_SUITE_END()
