// Cluster-wide queue controls with real worker processes: `queues pause`
// stops new starts on every node while running jobs finish (and hands the
// buffered ones back uncharged), a worker restarted while the queue is
// paused runs nothing of it, `queues resume` drains the queue; and
// global_concurrency holds across two processes, as the handlers
// themselves observe it (the `record` kind's execution rows).

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <thread>
#include <string>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

namespace {

/// The most handler runs that overlapped at any moment, from the `record`
/// kind's rows (each run's start to its end, as the handler saw them).
const char* const max_overlap_sql =
  "SELECT coalesce(max(c), 0) FROM (SELECT (SELECT count(*) FROM "
  "job_executions AS x WHERE x.started_at <= e.started_at AND "
  "(x.finished_at IS NULL OR x.finished_at > e.started_at)) AS c "
  "FROM job_executions AS e) AS s";

} // namespace

BOOST_AUTO_TEST_SUITE(queue_controls_test)

BOOST_AUTO_TEST_CASE(pause_stops_new_starts_on_every_node_and_survives_a_restart) {
  fault_env env{"queue_pause"};
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'record', '{\"ms\": 1500}' "
          "FROM generate_series(1, 40)");
  worker_timings ta;
  ta.node = "A";
  ta.concurrency = 4;
  // A buffer of 4 jobs per node: else the node that starts first may claim
  // all 40 into its buffer (its claims grow while handlers outrun them)
  // before the other claims anything, and only one node runs jobs.
  ta.extra_toml = "local_queue_size = 4\n";
  auto tb = ta;
  tb.node = "B";
  auto a = env.start_worker("A", ta);
  auto b = env.start_worker("B", tb);
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] {
      return db.scalar("SELECT count(DISTINCT worker) FROM job_executions "
                       "WHERE finished_at IS NULL") == 2;
    }, 60s, 20ms),
    "both workers did not start jobs");

  auto paused = env.run({"queues", "pause", "default"});
  BOOST_REQUIRE_MESSAGE(paused.exit_code == 0, paused.err);
  // Acknowledged: from here no new start, at the latest one poll interval
  // (200 ms) later; the NOTIFY makes it at once.
  auto acked = db.text("SELECT clock_timestamp()::text");
  BOOST_TEST(contains(paused.out, "queue default paused"), paused.out);

  // Running jobs finish; buffered ones go back, uncharged.
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'")
             == 0;
    }, 30s, 50ms),
    "jobs still running 30 s after the pause");
  auto started_late = db.scalar(
    "SELECT count(*) FROM job_executions WHERE started_at > '" + acked
    + "'::timestamptz + interval '200 milliseconds'");
  BOOST_TEST(started_late == 0);
  BOOST_TEST_MESSAGE(
    "runs started after the acknowledgement: "
    << db.scalar("SELECT count(*) FROM job_executions WHERE started_at > '"
                 + acked + "'::timestamptz"));
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions WHERE "
                       "finished_at IS NULL") == 0);
  auto ran = db.scalar("SELECT count(*) FROM job_executions");
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                       "AND error_count = 0")
             == 40 - db.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                               "'completed'"));
  BOOST_TEST(contains(a->err() + b->err(), "queue paused (told by NOTIFY)"));

  // A restarted worker finds the pause in the database and runs nothing.
  a->signal(SIGTERM);
  BOOST_REQUIRE(a->wait_exit(30s).has_value());
  auto a2 = env.start_worker("A2", ta);
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] {
      return contains(a2->err(), "queue paused (found on a claim)");
    }, 30s, 50ms),
    "the restarted worker did not find the pause");
  std::this_thread::sleep_for(1500ms);
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions") == ran);

  auto listed = env.run({"queues", "--json"});
  BOOST_TEST(listed.exit_code == 0, listed.err);
  BOOST_TEST(contains(listed.out, "\"paused\":true"), listed.out);

  // Resumed: both nodes drain the queue.
  auto resumed = env.run({"queues", "resume", "default"});
  BOOST_REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.err);
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
             == 40;
    }, 90s, 100ms),
    "the queue did not drain after the resume: "
      << db.describe("SELECT count(*) FROM jobs_live WHERE state = 'completed'"));
  // Released jobs were never charged an attempt.
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE error_count > 0") == 0);
  BOOST_TEST(db.scalar("SELECT count(DISTINCT job_id) FROM job_executions")
             == 40);
}

BOOST_AUTO_TEST_CASE(global_concurrency_holds_across_two_processes) {
  fault_env env{"global_concurrency"};
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'record', '{\"ms\": 300}' "
          "FROM generate_series(1, 30)");
  worker_timings ta;
  ta.node = "A";
  ta.concurrency = 5;
  // (Appended inside [queues.default].)
  ta.extra_toml = "global_concurrency = 3\n";
  auto tb = ta;
  tb.node = "B";
  auto a = env.start_worker("A", ta);
  auto b = env.start_worker("B", tb);
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
             == 30;
    }, 120s, 100ms),
    "the 30 jobs did not complete");
  auto overlap = db.scalar(max_overlap_sql);
  BOOST_TEST_MESSAGE("most runs at once: "
                     << overlap << "; runs per worker: "
                     << db.describe("SELECT string_agg(w || '=' || n, ', ') "
                                    "FROM (SELECT split_part(worker, ':', 1) "
                                    "AS w, count(*) AS n FROM job_executions "
                                    "GROUP BY 1) AS x"));
  BOOST_TEST(overlap <= 3);
  BOOST_TEST(overlap >= 2); // the limit, not one node, bounded the runs
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions") == 30);
  BOOST_TEST(db.scalar("SELECT global_concurrency FROM queue_controls WHERE "
                       "queue = 'default'") == 3);
}

BOOST_AUTO_TEST_SUITE_END()
