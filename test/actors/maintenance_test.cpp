// Deterministic tests of maintenance's timers: rescues every rescue
// interval, never more than one at a time; retention deletes that repeat at
// once while they come back full, then the lane tables' vacuum check and a
// wait for the next cleanup interval.

#include "actor_fixture.hpp"

#include "actor_worker/actors/maintenance.hpp"
#include "actor_worker/config/defaults.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

struct maintenance_fixture : fixture {
  void spawn_maintenance(std::chrono::milliseconds cleanup_interval,
                         std::chrono::milliseconds rescue_interval = 30s,
                         std::chrono::milliseconds sample_interval = 0s) {
    script->maintenance = true;
    maintenance_config mc;
    mc.store = storage;
    mc.cleanup_interval = cleanup_interval;
    mc.rescue_interval = rescue_interval;
    mc.sample_interval = sample_interval;
    auto m = sys->spawn(aw::maintenance_behavior, mc);
    spawned.push_back(caf::actor_cast<caf::actor>(m));
    run();
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(maintenance_test, maintenance_fixture)

BOOST_AUTO_TEST_CASE(full_rounds_go_again_at_once_then_vacuum_and_wait) {
  auto full = int64_t{defaults::cleanup_batch};
  script->cleanup_results = {full, full, 17};
  spawn_maintenance(10s);
  // Two full rounds and the partial one, without the clock moving, then
  // one vacuum check.
  BOOST_TEST(script->cleanups == 3);
  BOOST_TEST(script->vacuums == 1);
  advance(9s);
  BOOST_TEST(script->cleanups == 3);
  advance(1s);
  BOOST_TEST(script->cleanups == 4);
  BOOST_TEST(script->vacuums == 2);
}

BOOST_AUTO_TEST_CASE(an_idle_database_costs_one_cleanup_and_one_check_per_interval) {
  spawn_maintenance(30s);
  BOOST_TEST(script->cleanups == 1);
  BOOST_TEST(script->vacuums == 1);
  for (int i = 2; i <= 5; ++i) {
    advance(30s);
    BOOST_TEST(script->cleanups == i);
    BOOST_TEST(script->vacuums == i);
  }
}

BOOST_AUTO_TEST_CASE(rescue_runs_every_rescue_interval_whatever_the_cleanup_interval) {
  spawn_maintenance(10s, 1s);
  // The first rescue runs at once (a new leader may take over from a
  // killed one), the next one interval later.
  BOOST_TEST(script->rescues == 1);
  advance(999ms);
  BOOST_TEST(script->rescues == 1);
  advance(1ms);
  BOOST_TEST(script->rescues == 2);
  for (int i = 0; i < 3; ++i)
    advance(1s);
  BOOST_TEST(script->rescues == 5);
  BOOST_TEST(script->cleanups == 1);
}

BOOST_AUTO_TEST_CASE(queues_are_sampled_at_start_and_every_sample_interval) {
  spawn_maintenance(10min, 10min, 15s);
  BOOST_TEST(script->samples == 1);
  advance(14s);
  BOOST_TEST(script->samples == 1);
  advance(1s);
  BOOST_TEST(script->samples == 2);
  for (int i = 0; i < 3; ++i)
    advance(15s);
  BOOST_TEST(script->samples == 5);
}

BOOST_AUTO_TEST_CASE(without_metrics_the_queues_are_never_sampled) {
  spawn_maintenance(10s, 1s);
  advance(5min);
  BOOST_TEST(script->samples == 0);
}

BOOST_AUTO_TEST_CASE(a_failed_rescue_is_tried_again_next_interval) {
  script->fail_rescues = true; // the database is gone
  spawn_maintenance(10s, 1s);
  advance(1s);
  advance(1s);
  BOOST_TEST(script->rescues == 3);
  script->fail_rescues = false;
  advance(1s);
  advance(1s);
  BOOST_TEST(script->rescues == 5);
}

BOOST_AUTO_TEST_CASE(a_slow_rescue_delays_the_next_instead_of_piling_up) {
  // The connection is slow: a rescue takes 5 s to answer (and reports a
  // job, which runs the log line).
  script->rescue_delay = 5s;
  rescued_job r;
  r.id = 7;
  r.kind = "noop";
  script->rescued = {r};
  spawn_maintenance(10s, 1s);
  BOOST_TEST(script->rescues == 1);
  // No second rescue while the first is in flight...
  advance(4999ms);
  BOOST_TEST(script->rescues == 1);
  // ...and the next comes one interval after the reply (at 6 s).
  advance(1ms);
  advance(999ms);
  BOOST_TEST(script->rescues == 1);
  advance(1ms);
  BOOST_TEST(script->rescues == 2);
}

BOOST_AUTO_TEST_SUITE_END()
