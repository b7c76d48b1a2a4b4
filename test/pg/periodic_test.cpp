// Periodic ticks against a real PostgreSQL: a tick is enqueued exactly
// once however many schedulers race for it (two leaders for a moment, or
// every node), an earlier tick never after a later one, a rolled-back take
// leaves the tick to another scheduler; `actor-worker periodic --json`
// lists the schedules with their last and next run.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "actor_worker/storage/periodic_schedules.hpp"

using namespace std::chrono_literals;

namespace {

/// 2026-12-01T12:00:00Z.
constexpr int64_t noon = 1'796'126'400;

aw::periodic_tick tick_of(const std::string& name, int64_t at) {
  aw::periodic_tick t;
  t.name = name;
  t.spec = "* * * * * * @ UTC";
  t.tick = at;
  t.kind = "report";
  t.args = R"({"to":"ops"})";
  t.queue = "default";
  t.priority = 2;
  return t;
}

/// Takes `tick` in a transaction of its own on `conn` and commits.
int64_t take(pqxx::connection& conn, const aw::periodic_tick& tick) {
  pqxx::work tx{conn};
  auto id = aw::storage::enqueue_periodic_tick(tx, tick);
  tx.commit();
  return id;
}

} // namespace

BOOST_AUTO_TEST_SUITE(periodic_test)

BOOST_AUTO_TEST_CASE(two_schedulers_on_one_tick_enqueue_it_once) {
  aw::test::fresh_database db;
  auto a = db.connect();
  auto b = db.connect();
  auto tick = tick_of("report", noon);
  // A takes the tick and holds its transaction open; B, on the same tick,
  // must wait for A and then find it taken.
  pqxx::work ta{*a};
  auto id_a = aw::storage::enqueue_periodic_tick(ta, tick);
  BOOST_TEST(id_a > 0);
  auto second = std::async(std::launch::async, [&] { return take(*b, tick); });
  BOOST_TEST((second.wait_for(300ms) == std::future_status::timeout),
             "the second scheduler waits for the first one's transaction");
  ta.commit();
  BOOST_TEST(second.get() == 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE id = " + std::to_string(id_a)
                       + " AND kind = 'report' AND queue = 'default' AND priority = 2"
                         " AND args = '{\"to\":\"ops\"}'"
                         " AND metadata = '{\"periodic\":\"report\",\"tick\":"
                         "\"2026-12-01T12:00:00Z\"}'")
             == 1);
  BOOST_TEST(db.scalar("SELECT last_job_id FROM periodic_schedules WHERE name = 'report'")
             == id_a);
  BOOST_TEST(db.scalar("SELECT extract(epoch FROM last_tick)::bigint FROM "
                       "periodic_schedules WHERE name = 'report'")
             == noon);
}

BOOST_AUTO_TEST_CASE(eight_racing_schedulers_enqueue_each_of_fifty_ticks_once) {
  aw::test::fresh_database db;
  const int schedulers = 8;
  const int ticks = 50;
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(schedulers);
  for (int s = 0; s < schedulers; ++s)
    threads.emplace_back([&, s] {
      try {
        auto conn = db.connect();
        for (int i = 0; i < ticks; ++i)
          if (take(*conn, tick_of("beat", noon + i)) > 0)
            ++taken;
      } catch (const std::exception& e) {
        errors[s] = e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  for (auto& e : errors)
    BOOST_TEST(e == "");
  BOOST_TEST(taken.load() == ticks);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == ticks);
  BOOST_TEST(db.scalar("SELECT count(DISTINCT metadata->>'tick') FROM jobs_live") == ticks);
  BOOST_TEST(db.scalar("SELECT extract(epoch FROM last_tick)::bigint FROM "
                       "periodic_schedules WHERE name = 'beat'")
             == noon + ticks - 1);
}

BOOST_AUTO_TEST_CASE(an_earlier_or_the_same_tick_is_never_enqueued_again) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  BOOST_TEST(take(*conn, tick_of("r", noon + 100)) > 0);
  BOOST_TEST(take(*conn, tick_of("r", noon + 90)) == 0);
  BOOST_TEST(take(*conn, tick_of("r", noon + 100)) == 0);
  BOOST_TEST(take(*conn, tick_of("r", noon + 101)) > 0);
  // Schedules are independent.
  BOOST_TEST(take(*conn, tick_of("other", noon + 90)) > 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 3);
}

BOOST_AUTO_TEST_CASE(a_rolled_back_take_leaves_the_tick_to_another_scheduler) {
  aw::test::fresh_database db;
  auto a = db.connect();
  auto b = db.connect();
  auto tick = tick_of("report", noon);
  {
    pqxx::work ta{*a};
    BOOST_TEST(aw::storage::enqueue_periodic_tick(ta, tick) > 0);
    auto second = std::async(std::launch::async, [&] { return take(*b, tick); });
    BOOST_TEST((second.wait_for(200ms) == std::future_status::timeout));
    ta.abort(); // the first leader lost its connection mid-enqueue
    BOOST_TEST(second.get() > 0);
  }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 1);
}

BOOST_AUTO_TEST_CASE(periodic_json_lists_schedules_with_their_last_and_next_run) {
  aw::test::fresh_database db;
  auto file = "/tmp/aw_periodic_test_" + std::to_string(::getpid()) + ".toml";
  {
    std::ofstream out(file);
    out << "[periodic.beat]\n"
           "cron = \"* * * * * *\"\n"
           "kind = \"report\"\n"
           "args = { to = \"ops\" }\n"
           "[periodic.nightly]\n"
           "cron = \"30 2 * * *\"\n"
           "kind = \"cleanup\"\n"
           "queue = \"maintenance\"\n"
           "priority = 5\n"
           "timezone = \"Europe/Berlin\"\n"
           "catch_up = \"none\"\n";
  }
  auto conn = db.connect();
  auto id = take(*conn, tick_of("beat", noon));
  take(*conn, tick_of("removed", noon));
  auto r = aw::test::run_binary("--config " + file + " periodic --json", db.url);
  auto text = aw::test::run_binary("--config " + file + " periodic", db.url);
  std::remove(file.c_str());
  BOOST_TEST(text.exit_code == 0);
  BOOST_TEST(text.out.find("beat  cron * * * * * *") != std::string::npos);
  BOOST_TEST(text.out.find("removed  NOT CONFIGURED") != std::string::npos);
  BOOST_TEST_INFO(r.err);
  BOOST_REQUIRE(r.exit_code == 0);
  auto list = nlohmann::json::parse(r.out);
  BOOST_REQUIRE(list.is_array());
  BOOST_REQUIRE(list.size() == 3u);
  auto& beat = list[0];
  BOOST_TEST(beat["name"] == "beat");
  BOOST_TEST(beat["configured"] == true);
  BOOST_TEST(beat["cron"] == "* * * * * *");
  BOOST_TEST(beat["timezone"] == "UTC");
  BOOST_TEST(beat["kind"] == "report");
  BOOST_TEST(beat["queue"] == "default");
  BOOST_TEST(beat["priority"] == 0);
  BOOST_TEST(beat["catch_up"] == "latest");
  BOOST_TEST(beat["last_tick"] == "2026-12-01T12:00:00Z");
  BOOST_TEST(beat["last_job_id"] == id);
  BOOST_TEST(beat["last_enqueued_at"].is_string());
  BOOST_TEST(beat["changed"] == false);
  BOOST_TEST(beat["next_tick"].is_string());
  auto& nightly = list[1];
  BOOST_TEST(nightly["name"] == "nightly");
  BOOST_TEST(nightly["last_tick"].is_null());
  BOOST_TEST(nightly["last_job_id"].is_null());
  BOOST_TEST(nightly["timezone"] == "Europe/Berlin");
  BOOST_TEST(nightly["catch_up"] == "none");
  BOOST_TEST(nightly["queue"] == "maintenance");
  BOOST_TEST(nightly["priority"] == 5);
  // 02:30 in Berlin is 00:30 or 01:30 UTC.
  auto next = nightly["next_tick"].get<std::string>();
  BOOST_TEST((next.substr(11) == "00:30:00Z" || next.substr(11) == "01:30:00Z"));
  auto& removed = list[2];
  BOOST_TEST(removed["name"] == "removed");
  BOOST_TEST(removed["configured"] == false);
  BOOST_TEST(removed["cron"] == "* * * * * *");
  BOOST_TEST(removed["timezone"] == "UTC");
  BOOST_TEST(removed["next_tick"].is_null());
}

BOOST_AUTO_TEST_SUITE_END()
