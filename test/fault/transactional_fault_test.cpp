// Transactional handlers under real faults: 500 `record_tx` jobs, whose
// handler inserts its job_executions row in the transaction that completes
// the job, are worked off by two worker processes (runs sharing
// transactions, up to 8 a commit) while the test kills a
// worker with SIGKILL, terminates the server processes of COMMITs in
// flight (pg_terminate_backend), and crashes PostgreSQL (immediate stop).
// Every COMMIT of such a transaction pauses in a deferred trigger, so the
// faults land mid-COMMIT. In the end every job completed, with exactly one
// row: the effect exists exactly when the job is completed, and never
// twice.

#include <boost/test/unit_test.hpp>

#include <string>
#include <thread>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

BOOST_AUTO_TEST_SUITE(transactional_fault_test)

BOOST_AUTO_TEST_CASE(each_effect_exists_exactly_when_its_job_completed) {
  fault_env env{"tx_faults"};
  db_session db{env.url()};
  constexpr int jobs = 500;
  db.exec("CREATE FUNCTION pause_commit() RETURNS trigger LANGUAGE plpgsql "
          "AS $$ BEGIN PERFORM pg_sleep(0.02); RETURN NULL; END $$");
  db.exec("CREATE CONSTRAINT TRIGGER pause_commit AFTER INSERT ON "
          "job_executions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
          "EXECUTE FUNCTION pause_commit()");
  // Which transaction committed each effect (a savepoint's rows have an
  // xmin of their own; txid_current() names the top-level one).
  db.exec("ALTER TABLE job_executions ADD COLUMN tx bigint NOT NULL DEFAULT "
          "txid_current()");
  db.exec("INSERT INTO jobs_in (kind, args, max_attempts) SELECT 'record_tx', "
          "jsonb_build_object('ms', g % 3), 100 FROM generate_series(1, "
          + std::to_string(jobs) + ") AS g");
  // Failed runs come back after a backoff of seconds: the test pulls them
  // forward, so the faults, not the backoff, set its pace.
  auto hurry = [&] {
    db.exec("UPDATE jobs_in SET run_at = now() WHERE state = 'scheduled'");
  };
  auto completed = [&] {
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'");
  };
  auto progress_past = [&](int64_t n) {
    BOOST_REQUIRE_MESSAGE(wait_until(
                            [&] {
                              hurry();
                              return completed() >= n;
                            },
                            120s, 50ms),
                          "fewer than " << n << " jobs completed");
  };
  // Runs share transactions: 16 at once on 2 connections, up to 8 a
  // transaction, so every fault lands on groups.
  worker_timings ta;
  ta.node = "A";
  ta.concurrency = 16;
  ta.extra_toml = "transactional_group = 8\n\n[database]\n"
                  "transactional_pool_size = 2\n";
  worker_timings tb = ta;
  tb.node = "B";
  auto a = env.start_worker("A", ta);
  auto b = env.start_worker("B", tb);

  // COMMITs cut off: their server processes terminated while they pause.
  int terminated = 0;
  auto terminate_commits = [&](int n) {
    for (int i = 0; i < 400 && n > 0; ++i) {
      try {
        auto r = db.query("SELECT pg_terminate_backend(pid) FROM "
                          "pg_stat_activity WHERE datname = current_database() "
                          "AND query = 'COMMIT' AND wait_event = 'PgSleep'");
        for (const auto& row : r)
          if (row[0].as<bool>()) {
            ++terminated;
            --n;
          }
      } catch (const std::exception&) {
        // the server is coming back: look again
      }
      std::this_thread::sleep_for(5ms);
    }
  };
  progress_past(50);
  terminate_commits(20);
  // A worker killed mid-run, with transactions open or committing; its
  // jobs come back once its lease expires (3 s).
  progress_past(120);
  a->kill9();
  BOOST_TEST_MESSAGE("killed worker A at " << completed() << " completed");
  a = env.start_worker("A2", ta);
  terminate_commits(20);
  // PostgreSQL crashes (immediate stop) with COMMITs in flight.
  progress_past(220);
  env.cluster().crash();
  env.cluster().start();
  BOOST_TEST_MESSAGE("crashed PostgreSQL past 220 completed");
  progress_past(320);
  terminate_commits(20);
  b->kill9();
  b = env.start_worker("B2", tb);
  progress_past(400);
  env.cluster().crash();
  env.cluster().start();
  terminate_commits(20);

  bool done = wait_until(
    [&] {
      hurry();
      return completed() == jobs;
    },
    180s, 100ms);
  BOOST_REQUIRE_MESSAGE(
    done, "not every job completed: "
            << (done ? "" : db.describe("SELECT string_agg(state || ' ' || n, ', ') "
                                        "FROM (SELECT state, count(*) AS n FROM "
                                        "jobs_live GROUP BY state) s")));
  BOOST_TEST_MESSAGE(terminated << " COMMITs terminated; "
                     << db.scalar("SELECT count(*) FROM jobs_live WHERE attempt > 1")
                     << " jobs ran more than once");
  BOOST_TEST(terminated > 0);
  // Exactly one effect per job, each of the run that completed it.
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions") == jobs);
  BOOST_TEST(db.scalar("SELECT count(DISTINCT job_id) FROM job_executions") == jobs);
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_executions AS e JOIN "
                       "jobs_live AS j ON j.id = e.job_id AND j.attempt = "
                       "e.attempt AND j.state = 'completed'")
             == jobs);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  // And they did share: the rows name fewer transactions than jobs.
  auto commits = db.scalar("SELECT count(DISTINCT tx) FROM job_executions");
  BOOST_TEST_MESSAGE(jobs << " effects committed by " << commits << " transactions");
  BOOST_TEST(commits < jobs / 2);

  a->signal(SIGTERM);
  b->signal(SIGTERM);
  BOOST_TEST(a->wait_exit(30s).has_value());
  BOOST_TEST(b->wait_exit(30s).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
