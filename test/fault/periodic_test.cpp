// Periodic jobs with real processes: three worker nodes on an every-second
// schedule enqueue one job per tick, never two, also across killing
// (SIGKILL) the node that schedules: the elected leader
// (worker_nodes.leader). A new leader goes on once the killed one's lease
// ran out.

#include <boost/test/unit_test.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

namespace {

const char* const every_second = R"(
[periodic.beat]
cron = "* * * * * *"
kind = "noop"
args = { from = "periodic" }
)";

/// Seconds since the epoch of the latest tick enqueued so far (0: none).
int64_t latest_tick(db_session& db) {
  return db.scalar("SELECT coalesce(max(extract(epoch FROM (metadata->>'tick')"
                   "::timestamptz))::bigint, 0) FROM jobs_live WHERE "
                   "metadata->>'periodic' = 'beat'");
}

/// The ticks enqueued in [from, to] (seconds since the epoch) and how many
/// jobs each has.
std::map<int64_t, int64_t> jobs_per_tick(db_session& db, int64_t from, int64_t to) {
  std::map<int64_t, int64_t> out;
  auto rows = db.query(
    "SELECT extract(epoch FROM (metadata->>'tick')::timestamptz)::bigint AS t, "
    "count(*) AS n FROM jobs_live WHERE metadata->>'periodic' = 'beat' GROUP BY 1 "
    "HAVING extract(epoch FROM (metadata->>'tick')::timestamptz)::bigint "
    "BETWEEN " + std::to_string(from) + " AND " + std::to_string(to) + " ORDER BY 1");
  for (const auto& r : rows)
    out[r["t"].as<int64_t>()] = r["n"].as<int64_t>();
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(periodic_test)

BOOST_AUTO_TEST_CASE(three_nodes_enqueue_one_job_per_tick_also_across_killing_the_leader) {
  fault_env env{"periodic_three_nodes"};
  db_session db{env.url()};
  std::vector<std::unique_ptr<worker_process>> nodes;
  for (auto* name : {"A", "B", "C"}) {
    worker_timings t;
    t.node = name;
    t.extra_toml = every_second;
    nodes.push_back(env.start_worker(name, t));
  }
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return latest_tick(db) > 0; }, 60s),
                        "no periodic job was enqueued within 60 s");
  auto first = latest_tick(db);
  // Five seconds of ticks with all three nodes up.
  BOOST_REQUIRE(wait_until([&] { return latest_tick(db) >= first + 5; }, 30s));

  size_t victim = 0;
  // The node that schedules: the elected leader (the holder of the
  // unexpired lease, which worker_nodes.leader mirrors).
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] { return db.scalar("SELECT count(*) FROM worker_nodes WHERE leader") == 1; },
               30s),
    "no node shows as the leader in worker_nodes");
  auto leader_pid = db.scalar(
    "SELECT coalesce(max(w.pid), 0) FROM worker_nodes AS w JOIN cluster_leader "
    "AS l USING (worker_id) WHERE l.expires_at >= now() AND w.leader");
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]->pid() == leader_pid)
      victim = i;
  BOOST_REQUIRE_MESSAGE(nodes[victim]->pid() == leader_pid,
                        "the leader (pid " << leader_pid << ") is none of the three nodes");
  BOOST_TEST_MESSAGE("killing the leader, node " << nodes[victim]->label());
  auto before_kill = latest_tick(db);
  nodes[victim]->kill9();
  auto killed_at = db.scalar("SELECT extract(epoch FROM clock_timestamp())::bigint");

  // Another node takes the lease once it runs out (reclaim window 3 s less
  // a heartbeat) and goes on, with margin for a loaded machine.
  BOOST_REQUIRE_MESSAGE(wait_until([&] { return latest_tick(db) > killed_at; }, 30s),
                        "no tick after the kill was enqueued within 30 s");
  auto resumed = db.scalar(
    "SELECT min(extract(epoch FROM (metadata->>'tick')::timestamptz))::bigint "
    "FROM jobs_live WHERE metadata->>'periodic' = 'beat' AND "
    "(metadata->>'tick')::timestamptz > to_timestamp("
    + std::to_string(before_kill) + ")");
  // Five more seconds of ticks after the hand-over.
  BOOST_REQUIRE(wait_until([&] { return latest_tick(db) >= resumed + 5; }, 30s));
  auto last = latest_tick(db);

  // No tick has two jobs, anywhere.
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE metadata->>'periodic' = 'beat'")
             == db.scalar("SELECT count(DISTINCT metadata->>'tick') FROM jobs_live "
                          "WHERE metadata->>'periodic' = 'beat'"));
  // Every tick before the kill and every tick from the hand-over on has
  // exactly one job: at least ten seconds of ticks in all.
  auto before = jobs_per_tick(db, first, before_kill);
  auto after = jobs_per_tick(db, resumed, last);
  BOOST_TEST(before.size() == static_cast<size_t>(before_kill - first + 1));
  BOOST_TEST(after.size() == static_cast<size_t>(last - resumed + 1));
  BOOST_TEST(before.size() + after.size() >= 10u);
  for (auto& [tick, n] : before)
    BOOST_TEST(n == 1, "tick " << tick << " has " << n << " jobs");
  for (auto& [tick, n] : after)
    BOOST_TEST(n == 1, "tick " << tick << " has " << n << " jobs");
  // The ticks missed during the hand-over (if any) are no more than the
  // reclaim window and a few seconds of a loaded machine.
  BOOST_TEST(resumed - before_kill <= 10);
  BOOST_TEST_MESSAGE("ticks " << first << ".." << before_kill << " before the kill, "
                              << resumed << ".." << last << " after; "
                              << (resumed - before_kill - 1) << " missed in between");
  // The jobs ran (noop completes at once) on the nodes still up.
  BOOST_TEST(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE metadata->>'periodic' = "
                       "'beat' AND state NOT IN ('completed')")
             <= 2;
    },
    30s));
  // The schedule's row points at the latest job.
  BOOST_TEST(db.scalar("SELECT extract(epoch FROM last_tick)::bigint FROM "
                       "periodic_schedules WHERE name = 'beat'")
             >= last);
}

BOOST_AUTO_TEST_SUITE_END()
