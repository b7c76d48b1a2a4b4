// SIGTERM with long jobs running: the worker drains for its budget, then
// releases what still runs without charging an attempt, and exits 0; the
// released jobs are picked up by the next worker.

#include <boost/test/unit_test.hpp>

#include <string>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

BOOST_AUTO_TEST_SUITE(shutdown_test)

BOOST_AUTO_TEST_CASE(sigterm_with_20_long_jobs_drains_one_second_and_releases) {
  fault_env env{"sigterm"};
  db_session db{env.url()};
  // 10 short jobs (done well within the drain budget), 20 that would run a
  // minute.
  db.exec("INSERT INTO jobs_in (kind, args, tags) SELECT 'record', '{\"ms\": 400}', "
          "'{short}' FROM generate_series(1, 10)");
  db.exec("INSERT INTO jobs_in (kind, args, tags) SELECT 'record', '{\"ms\": 60000}', "
          "'{long}' FROM generate_series(1, 20)");
  const std::string shorts = " FROM jobs_live WHERE 'short' = ANY(tags)";
  const std::string longs = " FROM jobs_live WHERE 'long' = ANY(tags)";

  // A 2 s heartbeat (6 s window): on an overloaded machine a 1 s heartbeat
  // may go unanswered twice, and the watchdog would give the runs up
  // (they are then not released, by design).
  worker_timings ta;
  ta.node = "A";
  ta.heartbeat_interval = "2s";
  ta.reclaim_window = "6s";
  ta.concurrency = 30;
  ta.shutdown_drain = "1s";
  auto a = env.start_worker("A", ta);
  BOOST_REQUIRE_MESSAGE(
    wait_until(
      [&] {
        return db.scalar("SELECT count(*) FROM job_executions") == 30
               && db.scalar("SELECT count(*)" + longs + " AND state = 'running'")
                    == 20;
      },
      60s, 20ms),
    "the 30 jobs did not all start");
  auto short_running = db.scalar("SELECT count(*)" + shorts + " AND state = 'running'");

  auto signalled = std::chrono::steady_clock::now();
  a->signal(SIGTERM);
  auto code = a->wait_exit(30s);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - signalled);
  BOOST_TEST_MESSAGE("short jobs running at SIGTERM: "
                     << short_running << "; exited after " << took.count()
                     << " ms");
  BOOST_REQUIRE_MESSAGE(code.has_value(), "still running 30 s after SIGTERM");
  BOOST_TEST(*code == 0);
  // The drain budget is held for the long jobs, and not much longer.
  BOOST_TEST(took.count() >= 900);
  BOOST_TEST(took.count() < 5000);
  auto log = a->err();
  BOOST_TEST(contains(log, "received SIGTERM, shutting down gracefully"));
  BOOST_TEST(contains(log, "stopped: 20 job(s) released"));

  // Short jobs finished within the drain, once each.
  BOOST_TEST(db.scalar("SELECT count(*)" + shorts + " AND state = 'completed'") == 10);
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions e JOIN jobs j "
                       "ON j.id = e.job_id WHERE 'short' = ANY(j.tags) "
                       "AND e.finished_at IS NOT NULL")
             == 10);
  // Long jobs released: available again, no attempt charged, unlocked.
  BOOST_TEST(db.scalar("SELECT count(*)" + longs
                       + " AND state = 'available' AND error_count = 0 "
                         "AND locked_by IS NULL AND locked_at IS NULL "
                         "AND attempt = 1 AND last_error_message IS NULL")
             == 20);
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions e JOIN jobs j "
                       "ON j.id = e.job_id WHERE 'long' = ANY(j.tags) "
                       "AND e.finished_at IS NOT NULL")
             == 0);

  // The next worker claims them at once (no lease to wait for).
  worker_timings tb = ta;
  tb.node = "B";
  auto b = env.start_worker("B", tb);
  BOOST_REQUIRE_MESSAGE(
    wait_until(
      [&] {
        return db.scalar("SELECT count(*)" + longs
                         + " AND state = 'running' AND attempt = 2 "
                           "AND locked_by LIKE 'B:%'")
                 == 20
               && db.scalar("SELECT count(*) FROM job_executions WHERE attempt = 2 "
                            "AND worker LIKE 'B:%'")
                    == 20;
      },
      60s),
    "worker B did not pick up the released jobs");
  BOOST_TEST(db.scalar("SELECT count(*)" + longs + " AND error_count = 0") == 20);
  b->signal(SIGTERM);
  auto b_code = b->wait_exit(30s);
  BOOST_REQUIRE(b_code.has_value());
  BOOST_TEST(*b_code == 0);
  BOOST_TEST(db.scalar("SELECT count(*)" + longs
                       + " AND state = 'available' AND error_count = 0")
             == 20);
}

BOOST_AUTO_TEST_SUITE_END()
