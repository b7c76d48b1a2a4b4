// Deterministic tests of the poller on CAF's test coordinator: virtual
// time, a stub storage actor that records what it is asked, and a job
// dispatcher the test completes by hand.

#include "actor_fixture.hpp"

#include <set>

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

BOOST_FIXTURE_TEST_SUITE(poller_test, fixture)

BOOST_AUTO_TEST_CASE(running_never_exceeds_concurrency_and_claims_fill_a_buffer) {
  script->backlog = 1000;
  spawn_poller(8);
  run();
  // One claim takes the running round and a buffered one: more than the
  // free slots, whatever the concurrency.
  BOOST_TEST(running() == 8u);
  BOOST_REQUIRE(!script->claim_limits.empty());
  BOOST_TEST(script->claim_limits.front() > 8);
  // Across many rounds the handlers never exceed the concurrency, the
  // claims grow with the pace, and every job is started exactly once.
  for (int round = 0; round < 200 && script->backlog > 0; ++round) {
    dispatcher->complete(1 + round % 8);
    run();
    BOOST_TEST(running() <= 8u);
  }
  auto biggest = *std::max_element(script->claim_limits.begin(),
                                   script->claim_limits.end());
  BOOST_TEST(biggest > 16);
  std::set<int64_t> started(dispatcher->started.begin(),
                            dispatcher->started.end());
  BOOST_TEST(started.size() == dispatcher->started.size());
}

BOOST_AUTO_TEST_CASE(a_wake_up_during_a_claim_in_flight_is_not_lost) {
  // A job commits, and its NOTIFY reaches the poller, while a claim is in
  // flight whose snapshot predates the commit. The claim's empty result
  // must not make the poller wait for its idle poll (30 s here).
  auto p = spawn_poller(2, 30s);
  run();
  BOOST_TEST(running() == 0u);
  auto step = [&](const auto& whom) {
    BOOST_REQUIRE(sched->prioritize(whom));
    sched->run_once();
  };
  caf::anon_send(p, wake_atom::value);
  step(p); // the wake-up: a claim is scheduled
  step(p); // the claim goes to storage
  // The job commits now; its wake-up is handled before storage answers
  // (and cannot send another claim: one is in flight).
  caf::anon_send(p, wake_atom::value);
  step(p);
  if (sched->prioritize(p))
    sched->run_once(); // the claim scheduled by that wake-up, if any
  step(storage); // the claim, from its older snapshot: nothing
  script->backlog = 1;
  run(); // no time passes
  BOOST_TEST(running() == 1u);
  BOOST_TEST(script->backlog == 0);
}

BOOST_AUTO_TEST_CASE(a_claim_that_found_a_claim_lock_stuck_is_followed_by_another) {
  // A claim lock is stuck for three claims (each waited its bounded time
  // in the database): the poller claims again at once rather than after
  // its idle poll (30 s here), and runs the jobs as soon as a claim
  // reaches them.
  script->backlog = 5;
  script->blocked_claims = 3;
  spawn_poller(10, 30s);
  run(); // no time passes
  BOOST_TEST(script->blocked_claims == 0);
  BOOST_TEST(running() == 5u);
  BOOST_TEST(script->backlog == 0);
}

BOOST_AUTO_TEST_CASE(a_claim_is_awaited_only_while_handlers_stand_idle_with_nothing_buffered) {
  // Awaited claims answer before the outcomes on their connection commit;
  // a claim that only refills the buffer commits them in one round trip.
  script->backlog = 100000;
  spawn_poller(4);
  run();
  BOOST_REQUIRE(!script->claim_awaited.empty());
  BOOST_TEST(script->claim_awaited.front());
  BOOST_REQUIRE(!dispatcher->held.empty());
  auto before = script->claim_awaited.size();
  // Four run, more are buffered: the next claim only refills the buffer.
  for (int i = 0; i < 2000 && script->claim_awaited.size() == before; ++i) {
    dispatcher->complete(1);
    run();
  }
  BOOST_REQUIRE(script->claim_awaited.size() > before);
  BOOST_TEST(!script->claim_awaited[before]);
}

BOOST_AUTO_TEST_CASE(small_concurrency_still_claims_hundreds_per_statement) {
  // Handlers that finish at once: the buffer doubles while it runs dry,
  // up to local_queue_size, so a concurrency of 2 claims in big batches.
  script->backlog = 20000;
  spawn_poller(2, 1s, 2s, {}, 1000);
  run();
  for (int i = 0; i < 2000 && script->backlog > 0; ++i) {
    dispatcher->complete(dispatcher->held.size());
    run();
  }
  auto biggest = *std::max_element(script->claim_limits.begin(),
                                   script->claim_limits.end());
  BOOST_TEST(biggest >= 300);
  BOOST_TEST(script->claim_limits.size() < 200u);
}

BOOST_AUTO_TEST_CASE(finished_burst_becomes_one_claim_and_one_finish_message) {
  script->backlog = 100;
  spawn_poller(10);
  run();
  auto claims_before = script->claim_limits.size();
  auto finish_before = script->finish_messages;
  // Ten jobs finish at once: their outcomes reach storage in one message,
  // and the room they free is claimed in one statement.
  dispatcher->complete(10);
  run();
  BOOST_TEST(script->claim_limits.size() <= claims_before + 1);
  BOOST_TEST(script->finish_messages == finish_before + 1);
  BOOST_TEST(script->finished.size() == 10u);
}

BOOST_AUTO_TEST_CASE(claims_are_bounded_in_bytes_as_well_as_rows) {
  // 1,000-byte args, a 10,000-byte bound: never more than 10 jobs held
  // (buffered or running), though the concurrency is 50.
  script->backlog = 100;
  script->args = std::string(1000 - 4, 'x');
  spawn_poller(50, 1s, 2s, {}, 1000, 10000);
  run();
  BOOST_TEST(running() <= 10u);
  BOOST_TEST(running() >= 9u);
  for (auto b : script->claim_bytes)
    BOOST_TEST(b <= 10000);
  // Five finish: the next claim may bring only what their bytes freed.
  dispatcher->complete(5);
  run();
  advance(1s);
  BOOST_TEST(script->claim_bytes.back() == 5000);
  BOOST_TEST(running() == 10u);
}

BOOST_AUTO_TEST_CASE(a_single_job_bigger_than_the_byte_bound_still_runs) {
  script->backlog = 3;
  script->args = std::string(50000, 'x');
  spawn_poller(4, 1s, 2s, {}, 1000, 10000);
  run();
  BOOST_TEST(running() == 1u);
  dispatcher->complete(1);
  run();
  BOOST_TEST(running() == 1u);
  BOOST_TEST(script->finished.size() == 1u);
}

BOOST_AUTO_TEST_CASE(executors_are_reused_from_job_to_job) {
  script->backlog = 50;
  auto p = spawn_poller(2);
  run();
  for (int i = 0; i < 30; ++i) {
    dispatcher->complete(2);
    run();
  }
  BOOST_TEST(script->finished.size() == 50u);
  // Two slots, two executor actors for fifty jobs: the poller plus its
  // executors are the only actors besides the fixture's.
  auto& st = caf::actor_cast<poller_pointer>(p)->state;
  BOOST_TEST(st.executors->size() == 2u);
}

BOOST_AUTO_TEST_CASE(the_activity_report_counts_snoozes_cancels_and_parked_jobs_apart_from_failures) {
  script->backlog = 5;
  auto p = spawn_poller(5);
  run();
  BOOST_REQUIRE_EQUAL(running(), 5u);
  for (auto kind : {outcome_kind::completed, outcome_kind::snoozed,
                    outcome_kind::cancelled, outcome_kind::waiting_callback,
                    outcome_kind::retryable_failure})
    dispatcher->finish_with(kind);
  run();
  auto& st = caf::actor_cast<poller_pointer>(p)->state;
  BOOST_TEST(st.completed == 1u);
  BOOST_TEST(st.snoozed == 1u);
  BOOST_TEST(st.cancelled == 1u);
  BOOST_TEST(st.parked == 1u);
  BOOST_TEST(st.failed == 1u);
  BOOST_TEST(st.reported() == 5u);
}

BOOST_AUTO_TEST_CASE(a_claim_in_flight_when_the_drain_runs_out_is_back_before_the_running_jobs_are_released) {
  // Its statement could otherwise run after the release commits, take the
  // released jobs again and hand them back a second time.
  script->backlog = 2;
  script->release_to_backlog = true;
  auto p = spawn_poller(2, 1s, 100ms);
  run();
  BOOST_REQUIRE_EQUAL(running(), 2u);
  script->claim_delay = 500ms;
  caf::anon_send(p, wake_atom::value);
  run();
  BOOST_REQUIRE_EQUAL(script->delayed_claims.size(), 1u);
  std::shared_ptr<int64_t> released = std::make_shared<int64_t>(-1);
  auto client = sys->spawn([p, released](caf::event_based_actor* self) {
    self->request(p, caf::infinite, drain_atom::value)
      .then([released](int64_t n) { *released = n; });
  });
  spawned.push_back(client);
  run();
  advance(100ms); // the budget runs out; the claim is still out
  BOOST_TEST(script->released.empty());
  advance(400ms); // the claim is back (empty), then the running jobs go
  BOOST_TEST(script->released.size() == 2u);
  BOOST_TEST(*released == 2);
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

BOOST_AUTO_TEST_CASE(an_awaited_claim_goes_where_no_outcome_is_being_recorded) {
  // Two storage actors (connections). Outcomes go to them by the job id's
  // receipt bucket (id / 64), and a storage actor records them
  // synchronously, a WAL flush each: a claim that handlers stand idle for
  // goes to the other one, whatever the turn.
  auto second = add_completer();
  script->backlog = 1; // job 64, of bucket 1: its outcome goes to the second
  script->next_id = 64;
  auto p = spawn_poller(4, 30s);
  run();
  BOOST_REQUIRE(running() == 1u);
  BOOST_REQUIRE(script->claim_limits.size() == 1u);
  BOOST_REQUIRE(second->claim_limits.empty());
  // It finishes as another job commits (its wake-up).
  script->backlog = 1;
  script->next_id = 3;
  dispatcher->complete(64);
  caf::anon_send(p, wake_atom::value);
  run();
  BOOST_TEST(second->finished == std::vector<int64_t>{64});
  BOOST_TEST(second->claim_limits.empty());
  BOOST_REQUIRE(script->claim_limits.size() == 2u);
  BOOST_TEST(script->claim_awaited.back());
  BOOST_TEST(running() == 1u);
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
  BOOST_REQUIRE(script->backlog == 0);
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
  // The budget runs out: the three still running are released, as
  // started (their attempt counts).
  advance(1s);
  BOOST_TEST(*released == 3);
  BOOST_TEST(script->released.size() == 3u);
  for (auto started : script->released_started)
    BOOST_TEST(started);
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

BOOST_AUTO_TEST_CASE(drain_releases_buffered_jobs_at_once_without_charging) {
  script->backlog = 10;
  auto p = spawn_poller(2, 1s, 5s);
  run();
  BOOST_REQUIRE_EQUAL(running(), 2u);
  std::shared_ptr<int64_t> released = std::make_shared<int64_t>(-1);
  auto client = sys->spawn([p, released](caf::event_based_actor* self) {
    self->request(p, caf::infinite, drain_atom::value)
      .then([released](int64_t n) { *released = n; });
  });
  spawned.push_back(client);
  run();
  // The jobs claimed but never started go back at once, as not started.
  auto unstarted = script->released.size();
  BOOST_TEST(unstarted >= 1u);
  for (auto started : script->released_started)
    BOOST_TEST(!started);
  for (auto id : script->released)
    BOOST_TEST(std::count(dispatcher->started.begin(),
                          dispatcher->started.end(), id)
               == 0);
  // The two running finish within the budget: recorded, nothing more
  // released, and no buffered job was started during the drain.
  dispatcher->complete(2);
  run();
  BOOST_TEST(*released == static_cast<int64_t>(unstarted));
  BOOST_TEST(script->finished.size() == 2u);
  BOOST_TEST(dispatcher->started.size() == 2u);
}

BOOST_AUTO_TEST_CASE(deadline_counts_from_the_handler_start_not_the_claim) {
  // One slot, jobs with a 5 s deadline claimed ahead into the buffer: the
  // third starts at 8 s and still gets its full 5 s.
  script->backlog = 3;
  script->deadline_ms = 5000;
  spawn_poller(1, 1s, 2s, {}, 10);
  run();
  BOOST_REQUIRE(script->claim_limits.front() >= 2);
  advance(4s);
  dispatcher->complete(1);
  run();
  advance(4s);
  dispatcher->complete(1);
  run();
  BOOST_REQUIRE_EQUAL(dispatcher->tokens.size(), 3u);
  advance(4999ms);
  BOOST_TEST(!dispatcher->tokens[2].cancelled());
  advance(1ms);
  BOOST_TEST(dispatcher->tokens[2].cancelled());
}

BOOST_AUTO_TEST_CASE(overrunning_the_deadline_cancels_the_run_and_charges_it) {
  script->backlog = 2;
  script->deadline_ms = 500;
  spawn_poller(2);
  run();
  dispatcher->complete(1); // the first finishes in time
  run();
  advance(499ms);
  BOOST_TEST(!dispatcher->tokens[1].cancelled());
  advance(1ms);
  BOOST_TEST(dispatcher->tokens[1].cancelled());
  BOOST_TEST(dispatcher->tokens[1].reason().find("deadline") != std::string::npos);
  dispatcher->complete(1); // the handler notices and returns
  run();
  BOOST_REQUIRE_EQUAL(script->outcomes.size(), 2u);
  BOOST_TEST((script->outcomes[0].kind == outcome_kind::completed));
  BOOST_TEST((script->outcomes[1].kind == outcome_kind::deadline_exceeded));
  BOOST_TEST(script->outcomes[1].message.find("deadline exceeded")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_outcome_its_handlers_transaction_committed_stands_past_the_deadline) {
  // A transactional handler's outcome is in the database with its writes
  // when it returns: the executor hands it on as it is, even when the
  // deadline passed or the operator asked to cancel meanwhile.
  script->backlog = 2;
  script->deadline_ms = 500;
  auto p = spawn_poller(2);
  run();
  advance(500ms);
  caf::anon_send(p, cancel_atom::value, std::vector<int64_t>{2});
  run();
  job_outcome committed;
  committed.record = outcome_record::committed;
  dispatcher->finish_as(committed);
  dispatcher->finish_as(committed);
  run();
  BOOST_REQUIRE_EQUAL(script->outcomes.size(), 2u);
  for (auto& o : script->outcomes) {
    BOOST_TEST((o.kind == outcome_kind::completed));
    BOOST_TEST((o.record == outcome_record::committed));
  }
}

BOOST_AUTO_TEST_CASE(a_stale_transactional_run_is_not_recorded) {
  script->backlog = 1;
  spawn_poller(1);
  run();
  job_outcome stale;
  stale.record = outcome_record::stale;
  dispatcher->finish_as(stale);
  run();
  BOOST_TEST(script->outcomes.empty());
  BOOST_TEST(running() == 0u);
}

BOOST_AUTO_TEST_CASE(a_handler_that_ignores_its_deadline_is_given_up_as_a_rescue) {
  script->backlog = 2;
  script->deadline_ms = 500;
  spawn_poller(1);
  run();
  advance(500ms); // the deadline: cancelled, but the handler keeps going
  BOOST_TEST(dispatcher->tokens[0].cancelled());
  BOOST_TEST(script->outcomes.empty());
  advance(1s); // the grace (abandon_grace = 1 s in the fixture)
  BOOST_REQUIRE_EQUAL(script->outcomes.size(), 1u);
  BOOST_TEST((script->outcomes[0].kind == outcome_kind::abandoned));
  BOOST_TEST(dispatcher->abandoned_ids == (std::vector<int64_t>{1}),
             boost::test_tools::per_element());
  // The slot went to the next job; the late result of the first is
  // dropped.
  BOOST_TEST(dispatcher->started.size() == 2u);
  dispatcher->complete(1);
  run();
  BOOST_TEST(script->outcomes.size() == 1u);
}

BOOST_AUTO_TEST_CASE(jobs_claimed_again_while_held_cancel_the_old_run_and_go_back) {
  // A database crash rolled back the claim of jobs 1 and 2 (and the lane
  // cursor): they run here, and the next claim returns them again.
  script->backlog = 2;
  auto p = spawn_poller(4);
  run();
  BOOST_REQUIRE_EQUAL(running(), 2u);
  script->backlog = 3;
  script->next_id = 1; // 1 and 2 again, then 3
  caf::anon_send(p, wake_atom::value);
  run();
  // The old runs can no longer record their outcome: cancelled as lost.
  BOOST_TEST(dispatcher->tokens[0].cancelled());
  BOOST_TEST(dispatcher->tokens[1].cancelled());
  BOOST_TEST(dispatcher->tokens[0].reason().find("claimed again")
             != std::string::npos);
  // The new copies are handed back uncharged, not run beside the old ones;
  // job 3 runs.
  BOOST_TEST(script->released == (std::vector<int64_t>{1, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(script->released_started == (std::vector<bool>{false, false}),
             boost::test_tools::per_element());
  BOOST_TEST(dispatcher->started == (std::vector<int64_t>{1, 2, 3}),
             boost::test_tools::per_element());
  // What the old runs return is not recorded.
  dispatcher->complete(2);
  run();
  BOOST_TEST(std::count(script->finished.begin(), script->finished.end(), 1)
             == 0);
  BOOST_TEST(std::count(script->finished.begin(), script->finished.end(), 2)
             == 0);
}

BOOST_AUTO_TEST_SUITE_END()
