// Deterministic tests of the poller on CAF's test coordinator: virtual
// time, a stub storage actor that records what it is asked, and a job
// dispatcher the test completes by hand.

#include <boost/test/unit_test.hpp>

#include <memory>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/poller.hpp"
#include "messages/error.hpp"

using namespace std::chrono_literals;
using namespace aw;

namespace {

using time_point = caf::actor_clock::time_point;

/// What the stub storage was asked, and how it answers.
struct storage_script {
  /// Jobs due in the queue; claims take from here.
  int backlog = 0;
  /// Answer claims with ec::database_unavailable while true.
  bool fail_claims = false;
  int64_t next_id = 1;
  /// Each claim's limit and the virtual time it arrived.
  std::vector<int32_t> claim_limits;
  std::vector<time_point> claim_times;
  std::vector<int64_t> finished;
  std::vector<int64_t> released;
};

/// A storage actor that answers from a script. Cleanup and the schema
/// check are not the poller's business: asking for them fails the test.
storage_actor::behavior_type stub_storage(storage_actor::pointer self,
                                          std::shared_ptr<storage_script> s) {
  return {
    [=](claim_atom, const std::string& queue,
        int32_t limit) -> caf::result<std::vector<claimed_job>> {
      s->claim_limits.push_back(limit);
      s->claim_times.push_back(self->clock().now());
      if (s->fail_claims)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      std::vector<claimed_job> jobs;
      while (s->backlog > 0 && static_cast<int32_t>(jobs.size()) < limit) {
        claimed_job job;
        job.id = s->next_id++;
        job.kind = "noop";
        job.queue = queue;
        job.args = "{}";
        job.attempt = 1;
        jobs.push_back(job);
        --s->backlog;
      }
      return jobs;
    },
    [=](finish_atom, const job_outcome& o) -> finish_result {
      s->finished.push_back(o.job_id);
      return finish_result::applied;
    },
    [=](release_atom, const std::vector<int64_t>& ids) -> int64_t {
      s->released.insert(s->released.end(), ids.begin(), ids.end());
      return static_cast<int64_t>(ids.size());
    },
    [=](cleanup_atom) -> int64_t {
      BOOST_FAIL("the poller must not ask for cleanup");
      return 0;
    },
    [=](check_atom) -> bool {
      BOOST_FAIL("the poller must not run the schema check");
      return false;
    },
    [=](flush_atom) {},
  };
}

/// Holds the jobs it is given until the test completes them.
class manual_dispatcher : public aw::job_dispatcher {
public:
  void dispatch(claimed_job job, completion done) override {
    held.emplace_back(std::move(job), std::move(done));
  }

  /// Completes the `n` oldest held jobs successfully.
  void complete(size_t n) {
    for (size_t i = 0; i < n && !held.empty(); ++i) {
      auto [job, done] = std::move(held.front());
      held.erase(held.begin());
      job_outcome o;
      o.job_id = job.id;
      done(o);
    }
  }

  std::vector<std::pair<claimed_job, completion>> held;
};

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<storage_script> script = std::make_shared<storage_script>();
  std::shared_ptr<manual_dispatcher> dispatcher
    = std::make_shared<manual_dispatcher>();
  storage_actor storage;
  std::vector<caf::actor> spawned;

  fixture() {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    storage = sys->spawn(stub_storage, script);
    spawned.push_back(caf::actor_cast<caf::actor>(storage));
  }

  ~fixture() {
    // ~actor_system waits for every actor: stop them and drain the mailboxes.
    dispatcher->held.clear();
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched->run();
  }

  poller_actor spawn_poller(int concurrency,
                            std::chrono::milliseconds poll_interval = 1s,
                            std::chrono::milliseconds drain = 2s) {
    aw::poller_config pc;
    pc.queue = "default";
    pc.concurrency = concurrency;
    pc.poll_interval = poll_interval;
    pc.shutdown_drain = drain;
    pc.claimer = storage;
    pc.completers = {storage};
    pc.dispatcher = dispatcher;
    auto p = sys->spawn(aw::poller_behavior, pc);
    spawned.push_back(caf::actor_cast<caf::actor>(p));
    return p;
  }

  /// Runs every message that is ready, without moving the clock.
  void run() {
    sched->run();
  }

  /// Moves virtual time forward by `d`, running what becomes due.
  void advance(std::chrono::milliseconds d) {
    sched->advance_time(d);
    sched->run();
  }

  time_point now() {
    return sched->clock().now();
  }

  /// Jobs handed to executors and not finished yet.
  size_t running() const {
    return dispatcher->held.size();
  }
};

} // namespace

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
