// Deterministic tests of maintenance's rounds: retention deletes repeat at
// once while they come back full, then the lane tables get their vacuum
// check and the actor waits for the next interval.

#include "actor_fixture.hpp"

#include "actor_worker/actors/maintenance.hpp"
#include "actor_worker/config/defaults.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

struct maintenance_fixture : fixture {
  void spawn_maintenance(std::chrono::milliseconds interval) {
    script->maintenance = true;
    auto m = sys->spawn(aw::maintenance_behavior, storage, interval);
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

BOOST_AUTO_TEST_SUITE_END()
