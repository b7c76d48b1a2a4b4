// A worker killed with SIGKILL mid-run: its leases expire and another
// worker reclaims, reruns and completes every job exactly once.

#include <boost/test/unit_test.hpp>

#include <map>
#include <string>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

BOOST_AUTO_TEST_SUITE(kill_test)

BOOST_AUTO_TEST_CASE(kill_9_worker_jobs_are_reclaimed_and_complete_exactly_once) {
  fault_env env{"kill_9"};
  db_session db{env.url()};
  constexpr int jobs = 10;
  db.exec("INSERT INTO jobs (kind, args) SELECT 'record', '{\"ms\": 4000}' "
          "FROM generate_series(1, "
          + std::to_string(jobs) + ")");

  // A 2 s heartbeat (6 s window) rather than 1 s: on an overloaded machine
  // a worker whose heartbeats take over a second twice in a row gives its
  // runs up after R - H (by design), which would add runs this test counts.
  worker_timings ta;
  ta.node = "A";
  ta.heartbeat_interval = "2s";
  ta.reclaim_window = "6s";
  auto a = env.start_worker("A", ta);
  // Every job is running under A and its handler has started (one
  // execution row each).
  BOOST_REQUIRE_MESSAGE(
    wait_until(
      [&] {
        return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' "
                         "AND locked_by LIKE 'A:%'")
                 == jobs
               && db.scalar("SELECT count(*) FROM job_executions") == jobs;
      },
      60s),
    "the jobs did not all start running under worker A");
  BOOST_REQUIRE_EQUAL(db.scalar("SELECT count(DISTINCT locked_by) FROM jobs_live"), 1);
  auto a_id = db.text("SELECT min(locked_by) FROM jobs_live");
  BOOST_TEST_MESSAGE("worker A is " << a_id);
  BOOST_TEST(a_id.rfind("A:" + std::to_string(a->pid()) + ":", 0) == 0);

  a->kill9();
  auto killed_at = db.text("SELECT clock_timestamp()::text");
  // Nothing finished before the kill: every job had a run in flight.
  BOOST_REQUIRE_EQUAL(
    db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' AND locked_by = "
              + db.quote(a_id)),
    jobs);
  BOOST_REQUIRE_EQUAL(
    db.scalar("SELECT count(*) FROM job_executions WHERE finished_at IS NULL"),
    jobs);

  worker_timings tb = ta;
  tb.node = "B";
  auto b = env.start_worker("B", tb);
  // B rescues the expired leases (6 s), retries after the backoff (2 s) and
  // runs them (4 s).
  bool done = wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
             == jobs;
    },
    120s);
  BOOST_REQUIRE_MESSAGE(
    done, "worker B did not complete every reclaimed job; states: "
            << (done ? "" : db.describe("SELECT string_agg(id || '=' || state, ' ') FROM jobs_live")));
  BOOST_TEST(b->running());

  auto rows = db.query("SELECT id, state, error_count, attempt, locked_by, "
                       "coalesce(last_error_message, '') FROM jobs_live ORDER BY id");
  BOOST_REQUIRE_EQUAL(rows.size(), static_cast<size_t>(jobs));
  for (const auto& row : rows) {
    auto id = row[0].as<int64_t>();
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_TEST(row[1].as<std::string>() == "completed");
      BOOST_TEST(row[2].as<int>() == 1);
      BOOST_TEST(row[3].as<int>() == 2);
      BOOST_TEST(row[4].as<std::string>().rfind("B:", 0) == 0);
      auto message = row[5].as<std::string>();
      BOOST_TEST(contains(message, "lease expired"), message);
      BOOST_TEST(contains(message, a_id), message);
    }
  }

  // Per job: exactly two handler runs, the one killed with A (attempt 1,
  // never finished) and B's (attempt 2, finished, started only after A was
  // dead): never two live workers on one job, one successful completion.
  auto execs = db.query(
    "SELECT j.id, count(e.id), "
    "  count(*) FILTER (WHERE e.attempt = 1 AND e.worker = " + db.quote(a_id)
    + "     AND e.finished_at IS NULL), "
    "  count(*) FILTER (WHERE e.attempt = 2 AND e.worker = j.locked_by "
    "     AND e.finished_at IS NOT NULL "
    "     AND e.started_at > " + db.quote(killed_at) + "::timestamptz), "
    "  count(*) FILTER (WHERE e.finished_at IS NOT NULL) "
    "FROM jobs_live j LEFT JOIN job_executions e ON e.job_id = j.id "
    "GROUP BY j.id ORDER BY j.id");
  for (const auto& row : execs) {
    BOOST_TEST_CONTEXT("job " << row[0].as<int64_t>()) {
      BOOST_TEST(row[1].as<int>() == 2);
      BOOST_TEST(row[2].as<int>() == 1);
      BOOST_TEST(row[3].as<int>() == 1);
      BOOST_TEST(row[4].as<int>() == 1);
    }
  }
  BOOST_TEST(contains(b->err(), "rescued job"));

  b->signal(SIGTERM);
  auto code = b->wait_exit(30s);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "worker B still running 30 s after SIGTERM");
  BOOST_TEST(*code == 0);
}

BOOST_AUTO_TEST_SUITE_END()
