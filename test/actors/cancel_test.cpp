// Deterministic tests of `actor-worker jobs cancel` on the worker's side:
// a cancel request reaches the poller (from the listener's NOTIFY, or from
// the lease keeper's heartbeat round when the NOTIFY was missed); a
// buffered job ends cancelled without running, a running one through its
// handler's token, and its outcome is recorded as cancelled unless the
// handler completed.

#include "actor_fixture.hpp"

#include "actor_worker/actors/executor.hpp"
#include "actor_worker/actors/lease_keeper.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

struct cancel_fixture : fixture {
  lease_keeper_actor keeper;

  /// A lease keeper with a 1 s heartbeat and a 3 s reclaim window.
  void spawn_keeper(poller_actor p) {
    lease_keeper_config lc{1s, 3s, storage};
    keeper = sys->spawn(aw::lease_keeper_behavior, lc);
    spawned.push_back(caf::actor_cast<caf::actor>(keeper));
    caf::anon_send(keeper, pollers_atom::value, std::vector<poller_actor>{p});
    run();
  }

  void request_cancel(poller_actor p, std::vector<int64_t> ids) {
    caf::anon_send(p, cancel_atom::value, std::move(ids));
    run();
  }

  /// The recorded outcome of job `id`.
  const job_outcome& outcome_of(int64_t id) const {
    for (auto& o : script->outcomes)
      if (o.job_id == id)
        return o;
    BOOST_FAIL("no outcome recorded for job " << id);
    return script->outcomes.front();
  }

  bool recorded(int64_t id) const {
    return std::count(script->finished.begin(), script->finished.end(), id)
           > 0;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(cancel_test, cancel_fixture)

BOOST_AUTO_TEST_CASE(cancel_request_fires_the_running_handlers_token) {
  script->backlog = 2;
  auto p = spawn_poller(2);
  run();
  BOOST_REQUIRE_EQUAL(running(), 2u);
  request_cancel(p, {2});
  BOOST_TEST(!dispatcher->tokens[0].cancelled());
  BOOST_TEST(dispatcher->tokens[1].cancelled());
  BOOST_TEST(dispatcher->tokens[1].reason() == cancel_request_message);
  // Nothing is recorded until the handler returns.
  BOOST_TEST(!recorded(2));
}

BOOST_AUTO_TEST_CASE(a_cancelled_handlers_failure_is_recorded_as_cancelled) {
  script->backlog = 1;
  auto p = spawn_poller(1);
  run();
  request_cancel(p, {1});
  // The handler stops the way handlers do: it fails, saying why.
  dispatcher->finish_with(outcome_kind::retryable_failure,
                          "sleep cancelled: " + dispatcher->tokens[0].reason());
  run();
  auto& o = outcome_of(1);
  BOOST_TEST((o.kind == outcome_kind::cancelled));
  BOOST_TEST(o.message.find(cancel_request_message) == 0u, o.message);
  BOOST_TEST(o.message.find("sleep cancelled") != std::string::npos,
             o.message);
}

BOOST_AUTO_TEST_CASE(a_snooze_or_retry_after_a_cancel_request_does_not_run_again) {
  script->backlog = 2;
  auto p = spawn_poller(2);
  run();
  request_cancel(p, {1, 2});
  dispatcher->finish_with(outcome_kind::snoozed);
  dispatcher->finish_with(outcome_kind::retry_after);
  run();
  BOOST_TEST((outcome_of(1).kind == outcome_kind::cancelled));
  BOOST_TEST((outcome_of(2).kind == outcome_kind::cancelled));
  BOOST_TEST(outcome_of(1).message == cancel_request_message);
}

BOOST_AUTO_TEST_CASE(a_handler_that_completes_despite_the_cancel_stays_completed) {
  script->backlog = 1;
  auto p = spawn_poller(1);
  run();
  request_cancel(p, {1});
  dispatcher->complete(1); // ignored the token: the work was done
  run();
  BOOST_TEST((outcome_of(1).kind == outcome_kind::completed));
}

BOOST_AUTO_TEST_CASE(a_buffered_job_is_cancelled_without_running) {
  script->backlog = 3;
  auto p = spawn_poller(1); // job 1 runs, jobs 2 and 3 wait in the buffer
  run();
  BOOST_REQUIRE_EQUAL(running(), 1u);
  request_cancel(p, {2});
  BOOST_TEST(recorded(2));
  BOOST_TEST((outcome_of(2).kind == outcome_kind::cancelled));
  BOOST_TEST(outcome_of(2).message == cancel_request_message);
  // The next free slot runs job 3; job 2 never starts.
  dispatcher->complete(1);
  run();
  BOOST_TEST(dispatcher->started == (std::vector<int64_t>{1, 3}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_cancel_for_a_job_held_elsewhere_changes_nothing) {
  script->backlog = 1;
  auto p = spawn_poller(1);
  run();
  request_cancel(p, {42});
  BOOST_TEST(!dispatcher->tokens[0].cancelled());
  dispatcher->complete(1);
  run();
  BOOST_TEST((outcome_of(1).kind == outcome_kind::completed));
}

BOOST_AUTO_TEST_CASE(the_heartbeat_round_finds_a_cancel_whose_notify_was_missed) {
  script->backlog = 2;
  auto p = spawn_poller(2);
  run();
  spawn_keeper(p);
  // Recorded in job_cancel_requests while the LISTEN connection was away.
  script->cancel_requested = {1};
  advance(1s);
  BOOST_REQUIRE_EQUAL(script->cancel_checks.size(), 1u);
  auto asked = script->cancel_checks.front();
  std::sort(asked.begin(), asked.end());
  BOOST_TEST(asked == (std::vector<int64_t>{1, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(dispatcher->tokens[0].cancelled());
  BOOST_TEST(!dispatcher->tokens[1].cancelled());
  dispatcher->finish_with(outcome_kind::retryable_failure, "stopped");
  run();
  BOOST_TEST((outcome_of(1).kind == outcome_kind::cancelled));
  // Recorded, job 1 is no longer held: the next round asks about job 2.
  advance(1s);
  BOOST_REQUIRE_EQUAL(script->cancel_checks.size(), 2u);
  BOOST_TEST(script->cancel_checks.back() == (std::vector<int64_t>{2}),
             boost::test_tools::per_element());
  BOOST_TEST(!dispatcher->tokens[1].cancelled());
}

BOOST_AUTO_TEST_SUITE_END()
