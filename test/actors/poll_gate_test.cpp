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

  poll_gate_actor spawn_gate(int permits) {
    auto gate = sys->spawn(aw::poll_gate_behavior, permits);
    spawned.push_back(caf::actor_cast<caf::actor>(gate));
    return gate;
  }

  /// A gated poller of `queue` whose storage answers from `db`: a database
  /// of its own, as the pollers of another runtime sharing the gate have.
  poller_actor spawn_on(std::shared_ptr<storage_script> db,
                        poll_gate_actor gate, std::string queue) {
    auto own = storage;
    storage = sys->spawn(stub_storage, std::move(db));
    spawned.push_back(caf::actor_cast<caf::actor>(storage));
    auto p = spawn_poller(1, 1s, 2s, gate, 1000, int64_t{64} << 20,
                          std::move(queue));
    storage = own;
    return p;
  }

  /// Advances the clock an interval at a time for at most `bound`, until
  /// `backlog` (a queue's due jobs) is claimed; then completes the jobs.
  bool claimed_within(std::chrono::seconds bound, const int& backlog) {
    for (auto t = 0s; t < bound && backlog > 0; t += 1s)
      advance(1s);
    dispatcher->complete(dispatcher->held.size());
    run();
    return backlog == 0;
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

BOOST_AUTO_TEST_CASE(a_holder_whose_claim_was_not_full_still_polls_idly) {
  // Two queues, one permit, no NOTIFY: jobs due by time alone on either
  // queue are found within poll_interval x ceil(2 / 1) = 2 s, also after
  // q0's permit holder claimed fewer jobs than it asked for (it must not
  // give the permit back and then wait for a wake-up).
  auto gate = spawn_gate(1);
  script->queue_backlog["q0"] = 0;
  script->queue_backlog["q1"] = 0;
  spawn_poller(1, 1s, 2s, gate, 1000, int64_t{64} << 20, "q0");
  spawn_poller(1, 1s, 2s, gate, 1000, int64_t{64} << 20, "q1");
  run();
  for (int round = 0; round < 3; ++round)
    for (auto name : {"q0", "q1"}) {
      script->queue_backlog[name] = 1; // a retry comes due
      BOOST_TEST(claimed_within(2s, script->queue_backlog[name]),
                 name << "'s job waits (round " << round << ")");
    }
}

BOOST_AUTO_TEST_CASE(a_holder_backing_off_from_a_database_outage_passes_its_permit_on) {
  // One gate shared by runtimes on two databases, one permit. The pollers
  // of the database that is down back off (1 s, 2 s ... 30 s), whether
  // they held the permit when their claims began to fail or got it while
  // backing off; the other database's queue is still polled within
  // poll_interval x ceil(3 / 1) = 3 s.
  auto gate = spawn_gate(1);
  auto down = std::make_shared<storage_script>();
  down->fail_claims = true;
  spawn_on(down, gate, "a"); // gets the permit; its claim fails
  spawn_poller(1, 1s, 2s, gate, 1000, int64_t{64} << 20, "b");
  auto c = spawn_on(down, gate, "c");
  run();
  caf::anon_send(c, wake_atom::value); // fails while c waits for a permit
  run();
  for (int round = 0; round < 5; ++round) {
    script->backlog = 1;
    BOOST_TEST(claimed_within(3s, script->backlog),
               "b's job waits (round " << round << ")");
  }
  // The database is back: its queues are polled idly again.
  down->fail_claims = false;
  advance(30s);
  down->backlog = 1;
  BOOST_TEST(claimed_within(3s, down->backlog), "the recovered queue's job waits");
}

BOOST_AUTO_TEST_CASE(a_holder_held_by_a_rate_limit_passes_its_permit_on) {
  // The first queue's rate limit binds for good: its poller claims again on
  // the limit's timer, and the other queue is still polled within
  // poll_interval x ceil(2 / 1) = 2 s.
  auto gate = spawn_gate(1);
  auto limited = std::make_shared<storage_script>();
  limited->global_limit = 1;
  limited->held_by_limit = 1;
  limited->backlog = 5;
  spawn_on(limited, gate, "a"); // gets the permit; the limit cuts its claim
  spawn_poller(1, 1s, 2s, gate, 1000, int64_t{64} << 20, "b");
  run();
  for (int round = 0; round < 5; ++round) {
    script->backlog = 1;
    BOOST_TEST(claimed_within(2s, script->backlog),
               "b's job waits (round " << round << ")");
  }
  // The limited queue still tries its limit on its own timer.
  auto before = limited->claim_limits.size();
  advance(2s);
  BOOST_TEST(limited->claim_limits.size() > before);
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
