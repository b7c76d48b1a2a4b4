// The periodic scheduler on the test coordinator, in virtual time: it
// wakes at each tick (an every-second schedule enqueues every second, at
// the second), takes each tick once even with two schedulers on one
// store, catches up after downtime as catch_up says, starts a changed
// schedule afresh, and retries a failed enqueue with backoff without
// enqueueing the ticks that passed meanwhile one by one.

#include "actor_fixture.hpp"

#include "actor_worker/actors/periodic_scheduler.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

using sys_clock = std::chrono::system_clock;

/// 2026-12-01T12:00:00Z.
const cron_time noon{std::chrono::seconds{1'796'126'400}};

struct periodic_fixture : fixture {
  /// Virtual wall clock: `wall_start` when the fixture starts, then moving
  /// with the test coordinator's clock.
  sys_clock::time_point wall_start = sys_clock::time_point{noon} + 250ms;
  time_point virtual_start = now();

  sys_clock::time_point wall() {
    return wall_start
           + std::chrono::duration_cast<sys_clock::duration>(now() - virtual_start);
  }

  static periodic_config schedule(std::string name, std::string cron,
                                  catch_up_policy catch_up = catch_up_policy::latest) {
    periodic_config pc;
    pc.name = std::move(name);
    pc.cron = std::move(cron);
    pc.kind = "report";
    pc.args_json = R"({"to":"ops"})";
    pc.queue = "reports";
    pc.priority = 3;
    pc.catch_up = catch_up;
    return pc;
  }

  void spawn_scheduler(std::vector<periodic_config> schedules) {
    periodic_scheduler_config pc;
    pc.store = storage;
    pc.schedules = std::move(schedules);
    pc.wall_clock = [this] { return wall(); };
    auto p = sys->spawn(aw::periodic_behavior, pc);
    spawned.push_back(caf::actor_cast<caf::actor>(p));
    run();
  }

  /// A row as a scheduler of `pc` left it, its last tick at `last`.
  void stored(const periodic_config& pc, cron_time last, std::string spec = {}) {
    script->periodic[pc.name] = periodic_row{
      pc.name, spec.empty() ? pc.spec() : spec, last.time_since_epoch().count(), 1, ""};
  }

  /// The enqueued ticks, as text.
  std::vector<std::string> enqueued() const {
    std::vector<std::string> out;
    for (auto& t : script->ticks_enqueued)
      out.push_back(format_utc(cron_time{std::chrono::seconds{t.tick}}));
    return out;
  }

  /// Virtual milliseconds since the start at which each tick was asked.
  std::vector<int64_t> asked_at() const {
    std::vector<int64_t> out;
    for (auto& t : script->tick_times)
      out.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(t - virtual_start)
                      .count());
    return out;
  }
};

using strings = std::vector<std::string>;

std::string at(cron_time t) {
  return format_utc(t);
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(periodic_test, periodic_fixture)

BOOST_AUTO_TEST_CASE(an_every_second_schedule_enqueues_every_second_at_the_second) {
  spawn_scheduler({schedule("beat", "* * * * * *")});
  BOOST_TEST(script->periodic_loads == 1);
  BOOST_TEST(script->ticks_asked.empty());
  // 12:00:00.250: the first tick is 12:00:01, 750 ms away.
  advance(749ms);
  BOOST_TEST(script->ticks_asked.empty());
  advance(1ms);
  BOOST_TEST(enqueued() == strings{at(noon + 1s)});
  for (int i = 0; i < 9; ++i)
    advance(1s);
  BOOST_REQUIRE(script->ticks_enqueued.size() == 10u);
  for (int i = 0; i < 10; ++i) {
    BOOST_TEST(enqueued()[i] == at(noon + std::chrono::seconds{i + 1}));
    BOOST_TEST(asked_at()[i] == 750 + 1000 * i);
  }
  // The job is the schedule's.
  auto& t = script->ticks_enqueued.front();
  BOOST_TEST(t.name == "beat");
  BOOST_TEST(t.kind == "report");
  BOOST_TEST(t.args == R"({"to":"ops"})");
  BOOST_TEST(t.queue == "reports");
  BOOST_TEST(t.priority == 3);
  BOOST_TEST(t.spec == "* * * * * * @ UTC");
}

BOOST_AUTO_TEST_CASE(two_schedulers_on_one_store_enqueue_each_tick_once) {
  spawn_scheduler({schedule("beat", "* * * * * *")});
  spawn_scheduler({schedule("beat", "* * * * * *")});
  for (int i = 0; i < 10; ++i)
    advance(1s);
  // Both asked for every tick; the store took each once.
  BOOST_TEST(script->ticks_asked.size() == 20u);
  BOOST_REQUIRE(script->ticks_enqueued.size() == 10u);
  for (int i = 0; i < 10; ++i)
    BOOST_TEST(enqueued()[i] == at(noon + std::chrono::seconds{i + 1}));
}

BOOST_AUTO_TEST_CASE(it_sleeps_until_the_next_tick_of_the_earliest_schedule) {
  spawn_scheduler({schedule("hourly", "0 * * * *"),
                   schedule("quarter", "*/15 * * * *")});
  // Time passes a second at a time, as it does: the scheduler wakes at
  // most once a minute (max_sleep) and asks nothing before 12:15.
  for (int i = 0; i < 14 * 60 + 59; ++i)
    advance(1s);
  BOOST_TEST(script->ticks_asked.empty());
  advance(750ms);
  BOOST_TEST(enqueued() == strings{at(noon + 15min)});
  BOOST_TEST(asked_at().back() == (15min - 250ms).count());
  for (int i = 0; i < 45 * 60; ++i)
    advance(1s);
  // 12:30, 12:45, and both at 13:00.
  BOOST_REQUIRE(script->ticks_enqueued.size() == 5u);
  BOOST_TEST(enqueued()
             == (strings{at(noon + 15min), at(noon + 30min), at(noon + 45min),
                         at(noon + 60min), at(noon + 60min)}));
  BOOST_TEST(script->ticks_enqueued[3].name == "hourly");
  BOOST_TEST(script->ticks_enqueued[4].name == "quarter");
  BOOST_TEST(script->ticks_asked.size() == 5u);
}

BOOST_AUTO_TEST_CASE(catch_up_latest_enqueues_the_most_recent_missed_tick_once) {
  // Down since 11:00: the ticks 11:05 ... 12:00 were missed.
  auto pc = schedule("five", "*/5 * * * *");
  stored(pc, noon - 1h);
  wall_start = sys_clock::time_point{noon} + 150s; // 12:02:30
  spawn_scheduler({pc});
  BOOST_TEST(enqueued() == strings{at(noon)});
  advance(2min + 29s);
  BOOST_TEST(enqueued().size() == 1u);
  advance(1s);
  BOOST_TEST(enqueued() == (strings{at(noon), at(noon + 5min)}));
}

BOOST_AUTO_TEST_CASE(catch_up_none_skips_the_missed_ticks) {
  auto pc = schedule("five", "*/5 * * * *", catch_up_policy::none);
  stored(pc, noon - 1h);
  wall_start = sys_clock::time_point{noon} + 150s;
  spawn_scheduler({pc});
  BOOST_TEST(script->ticks_asked.empty());
  advance(2min + 30s);
  BOOST_TEST(enqueued() == strings{at(noon + 5min)});
}

BOOST_AUTO_TEST_CASE(a_tick_within_the_misfire_grace_is_on_time_even_with_none) {
  // A hand-over: the last tick is 12:00:00, the new scheduler starts at
  // 12:00:05.500. 12:00:05 is half a second late: on time; 12:00:01 to
  // 12:00:04 are gone.
  auto pc = schedule("beat", "* * * * * *", catch_up_policy::none);
  stored(pc, noon);
  wall_start = sys_clock::time_point{noon} + 5500ms;
  spawn_scheduler({pc});
  BOOST_TEST(enqueued() == strings{at(noon + 5s)});
  advance(500ms);
  BOOST_TEST(enqueued() == (strings{at(noon + 5s), at(noon + 6s)}));
}

BOOST_AUTO_TEST_CASE(a_changed_schedule_starts_afresh_without_catch_up) {
  auto pc = schedule("five", "*/5 * * * *");
  stored(pc, noon - 1h, "*/10 * * * * @ UTC");
  wall_start = sys_clock::time_point{noon} + 150s;
  spawn_scheduler({pc});
  BOOST_TEST(script->ticks_asked.empty());
  advance(2min + 30s);
  BOOST_TEST(enqueued() == strings{at(noon + 5min)});
  BOOST_TEST(script->periodic["five"].spec == "*/5 * * * * @ UTC");
}

BOOST_AUTO_TEST_CASE(a_failed_enqueue_is_retried_and_the_latest_due_tick_stands) {
  spawn_scheduler({schedule("beat", "* * * * * *")});
  script->fail_periodic = true; // the database goes away
  advance(750ms);                // 12:00:01: fails
  BOOST_TEST(script->ticks_asked.size() == 1u);
  advance(1s);                   // retry after 1 s (12:00:02): fails
  BOOST_TEST(script->ticks_asked.size() == 2u);
  BOOST_TEST(script->ticks_asked[1].tick
             == (noon + 2s).time_since_epoch().count());
  script->fail_periodic = false;
  advance(1999ms);               // backoff 2 s: nothing yet
  BOOST_TEST(script->ticks_asked.size() == 2u);
  advance(1ms);                  // 12:00:04.250: the latest due is 12:00:04
  BOOST_TEST(enqueued() == strings{at(noon + 4s)});
  advance(1s);
  BOOST_TEST(enqueued() == (strings{at(noon + 4s), at(noon + 5s)}));
}

BOOST_AUTO_TEST_CASE(a_failed_load_is_retried_with_backoff) {
  script->fail_periodic = true;
  spawn_scheduler({schedule("beat", "* * * * * *")});
  BOOST_TEST(script->periodic_loads == 1);
  advance(1s);
  BOOST_TEST(script->periodic_loads == 2);
  script->fail_periodic = false;
  advance(2s); // 12:00:03.250: loaded; the first tick is 12:00:04
  BOOST_TEST(script->periodic_loads == 3);
  BOOST_TEST(script->ticks_asked.empty());
  advance(750ms);
  BOOST_TEST(enqueued() == strings{at(noon + 4s)});
}

BOOST_AUTO_TEST_SUITE_END()
