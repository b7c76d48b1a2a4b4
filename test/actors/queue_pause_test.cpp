// The poller under cluster-wide queue controls, on CAF's test coordinator:
// a pause (by NOTIFY, by a claim's answer, or found by the probe of a
// poller whose buffer is full) releases the buffered jobs unstarted and
// uncharged, lets running jobs finish and starts nothing more; a resume
// claims at once; a claim cut by global_concurrency is retried when a slot
// frees, and the handlers never exceed the limit.

#include "actor_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

poller_state& state_of(const poller_actor& p) {
  return caf::actor_cast<poller_pointer>(p)->state;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(queue_pause_test, fixture)

BOOST_AUTO_TEST_CASE(a_pause_releases_the_buffer_and_lets_running_jobs_finish) {
  script->backlog = 100;
  script->release_to_backlog = true; // released jobs are due again
  auto p = spawn_poller(4);
  run();
  BOOST_TEST(running() == 4u);
  auto buffered = state_of(p).buffer.size();
  BOOST_TEST_REQUIRE(buffered > 0u);
  auto started_before = dispatcher->started.size();

  script->paused = true; // committed with the NOTIFY
  caf::anon_send(p, pause_atom::value, true);
  run();
  BOOST_TEST(state_of(p).paused);
  // Every buffered job went back, as never started (no attempt charged).
  BOOST_TEST(script->released.size() == buffered);
  for (bool started : script->released_started)
    BOOST_TEST(!started);
  BOOST_TEST(state_of(p).buffer.empty());
  // The running ones finish; nothing new starts, nothing is claimed.
  BOOST_TEST(running() == 4u);
  auto claims_before = script->claim_limits.size();
  dispatcher->complete(4);
  run();
  caf::anon_send(p, wake_atom::value); // a NOTIFY of a new job of the queue
  run();
  BOOST_TEST(running() == 0u);
  BOOST_TEST(script->finished.size() == 4u);
  BOOST_TEST(dispatcher->started.size() == started_before);
  BOOST_TEST(script->claim_limits.size() == claims_before);
  // While paused it asks every poll interval whether the pause holds.
  advance(1s);
  advance(1s);
  BOOST_TEST(script->probes == 2);
  BOOST_TEST(dispatcher->started.size() == started_before);

  // The resume takes effect at once.
  script->paused = false;
  caf::anon_send(p, pause_atom::value, false);
  run();
  BOOST_TEST(!state_of(p).paused);
  BOOST_TEST(running() == 4u);
}

BOOST_AUTO_TEST_CASE(a_poller_started_while_paused_runs_nothing_and_a_missed_resume_costs_one_poll) {
  script->backlog = 20;
  script->paused = true; // persisted: the claim says so
  auto p = spawn_poller(4, 1s);
  run();
  BOOST_TEST(state_of(p).paused);
  BOOST_TEST(running() == 0u);
  advance(1s);
  BOOST_TEST(running() == 0u);
  // Resumed, and the NOTIFY was lost: the next poll finds out.
  script->paused = false;
  advance(1s);
  BOOST_TEST(!state_of(p).paused);
  BOOST_TEST(running() == 4u);
}

BOOST_AUTO_TEST_CASE(a_full_buffer_still_finds_a_pause_within_one_poll_interval) {
  script->backlog = 1000;
  // Two slots, a buffer of at most four: it fills and stops claiming.
  auto p = spawn_poller(2, 1s, 2s, {}, 4);
  run();
  BOOST_TEST(running() == 2u);
  BOOST_TEST_REQUIRE(!state_of(p).buffer.empty());
  auto buffered = state_of(p).buffer.size();
  // Paused, and the NOTIFY was lost: no claim is due (no room), but the
  // idle tick asks.
  script->paused = true;
  advance(1s);
  BOOST_TEST(state_of(p).paused);
  BOOST_TEST(script->released.size() == buffered);
  BOOST_TEST(running() == 2u); // still finishing
}

BOOST_AUTO_TEST_CASE(a_claim_cut_by_global_concurrency_is_retried_when_a_slot_frees) {
  script->backlog = 200;
  script->global_limit = 3;
  auto p = spawn_poller(10, 30s);
  run();
  BOOST_TEST(running() == 3u);
  BOOST_TEST(state_of(p).limited);
  // It does not spin on the limit: no claim until something changes.
  auto claims = script->claim_limits.size();
  run();
  BOOST_TEST(script->claim_limits.size() == claims);
  // Each finished job frees a slot once its outcome commits.
  for (int round = 0; round < 40 && script->backlog > 0; ++round) {
    dispatcher->complete(1 + round % 3);
    run();
    BOOST_TEST(running() <= 3u);
    BOOST_TEST(script->held_by_limit <= 3);
  }
  BOOST_TEST(running() == 3u);
  BOOST_TEST(script->finished.size() >= 40u);
  // A slot freed by another node is found by the timer (poll_interval).
  script->held_by_limit -= 1; // another node's job finished
  auto before = dispatcher->started.size();
  advance(30s);
  BOOST_TEST(dispatcher->started.size() == before + 1);
}

BOOST_AUTO_TEST_SUITE_END()
