// Rows written with plain SQL, bypassing the API: the schema refuses the
// values that would make claims, outcomes or rescues fail for a whole
// queue (overflowing counters and durations, names that forge log lines,
// args that are not an object), and the rescue takes rows the runtime
// never writes but SQL can (running without a lease time, waiting without
// a timeout) instead of letting them block their ordering key forever.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/storage/job_store.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"

using aw::test::contains;

namespace {

/// Runs `sql`; returns the error message ("" when it succeeded).
std::string refusal(const aw::test::fresh_database& db, const std::string& sql) {
  try {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    tx.exec(sql);
    tx.commit();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

} // namespace

BOOST_AUTO_TEST_SUITE(hostile_rows_test)

BOOST_AUTO_TEST_CASE(the_schema_refuses_values_that_would_derail_a_worker) {
  aw::test::fresh_database db;
  struct bad {
    std::string sql;
    std::string constraint;
  };
  for (const auto& c : std::vector<bad>{
         {"INSERT INTO jobs_in (kind, attempt) VALUES ('k', 2147483647)",
          "jobs_counters_bounded"},
         {"INSERT INTO jobs_in (kind, error_count) VALUES ('k', 2147483647)",
          "jobs_counters_bounded"},
         {"INSERT INTO jobs_in (kind, max_attempts) VALUES ('k', 2000000)",
          "jobs_counters_bounded"},
         {"INSERT INTO jobs_in (kind, deadline_ms) VALUES ('k', 9223372036854775807)",
          "jobs_deadline_bounded"},
         {"INSERT INTO jobs_in (kind) VALUES (E'k\\n[error] forged')",
          "jobs_names_printable"},
         {"INSERT INTO jobs_in (kind, queue) VALUES ('k', E'q\\x1b[31m')",
          "jobs_names_printable"},
         {"INSERT INTO jobs_in (kind, queue) VALUES ('k', E'\\x7f')",
          "jobs_names_printable"},
         {"INSERT INTO jobs_in (kind, queue) VALUES ('k', '')",
          "jobs_queue_valid"},
         {"INSERT INTO jobs_in (kind) VALUES ('')", "jobs_kind_valid"},
         {"INSERT INTO jobs_in (kind) VALUES (repeat('k', 201))",
          "jobs_kind_valid"},
         {"INSERT INTO jobs_in (kind, args) VALUES ('k', '[1, 2]')",
          "jobs_args_object"},
         {"INSERT INTO jobs_in (kind, args) VALUES ('k', '42')",
          "jobs_args_object"},
         {"INSERT INTO jobs_in (kind, metadata) VALUES ('k', '\"x\"')",
          "jobs_metadata_object"}})
    BOOST_TEST_CONTEXT(c.sql) {
      auto why = refusal(db, c.sql);
      BOOST_TEST(contains(why, c.constraint), why);
    }
  // Updates are held to the same limits.
  BOOST_REQUIRE(refusal(db, "INSERT INTO jobs_in (kind) VALUES ('k')").empty());
  auto why = refusal(db, "UPDATE jobs_in SET attempt = 2147483647");
  BOOST_TEST(contains(why, "jobs_counters_bounded"), why);
  // What the API writes passes.
  BOOST_TEST(refusal(db, "INSERT INTO jobs_in (kind, queue, args, max_attempts, "
                         "deadline_ms) VALUES (repeat('k', 200), 'mail', "
                         "'{\"a\": [1]}', 1000000, 3153600000000)")
               .empty());
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 2);
}

BOOST_AUTO_TEST_CASE(rows_without_a_lease_time_or_a_timeout_are_rescued_and_unblock_their_key) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Each heads an ordering key, with a job waiting behind it.
  s.exec("INSERT INTO jobs_in (kind, ordering_key, state, attempt) "
         "VALUES ('k', 'a', 'running', 1)");
  s.exec("INSERT INTO jobs_in (kind, ordering_key, state, attempt, callback_id) "
         "VALUES ('k', 'b', 'waiting_external', 1, gen_random_uuid())");
  s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('k', 'a'), ('k', 'b')");
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  aw::storage::job_store store{opts};
  // Blocked: the heads are not finished.
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  auto rescued = store.rescue(100);
  BOOST_REQUIRE_EQUAL(rescued.size(), 2u);
  BOOST_TEST((rescued[0].reason == aw::rescue_reason::stale_heartbeat));
  BOOST_TEST(contains(rescued[0].message, "its claim is gone"),
             rescued[0].message);
  BOOST_TEST((rescued[1].reason == aw::rescue_reason::expired_callback));
  BOOST_TEST(contains(rescued[1].message, "it had no timeout"),
             rescued[1].message);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled' "
                      "AND error_count = 1 AND last_error_message IS NOT NULL")
             == 2);
  // Rescheduled with backoff: their keys' next jobs wait behind them, as
  // behind any retried head. Made due, the heads run again.
  s.exec("UPDATE jobs_in SET run_at = now() WHERE state = 'scheduled'");
  auto claimed = store.claim("default", 10).jobs;
  BOOST_TEST(claimed.size() == 2u);
}

BOOST_AUTO_TEST_CASE(rows_at_the_attempt_limit_are_dead_lettered_by_a_claim_not_left_in_the_queue) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // At the documented maximum of attempt: due and available, due and
  // scheduled, and heading an ordering key with a job behind it.
  s.exec("INSERT INTO jobs_in (kind, attempt) VALUES ('k', 1000000)");
  s.exec("INSERT INTO jobs_in (kind, attempt, state, run_at) "
         "VALUES ('k', 1000000, 'scheduled', now() - interval '1 second')");
  s.exec("INSERT INTO jobs_in (kind, attempt, ordering_key) VALUES ('k', 1000000, 'key')");
  s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('k', 'key')");
  s.exec("INSERT INTO jobs_in (kind) VALUES ('fresh')");
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  aw::storage::job_store store{opts};
  std::vector<std::string> kinds;
  for (int round = 0; round < 3; ++round)
    for (const auto& j : store.claim("default", 10).jobs)
      kinds.push_back(j.kind + (j.attempt == 1 ? "" : "?"));
  // The fresh job and the one behind the key run; the three that cannot
  // run again are dead letters that say why.
  std::sort(kinds.begin(), kinds.end());
  BOOST_TEST(kinds == (std::vector<std::string>{"fresh", "k"}));
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE attempt = 1000000 "
                      "AND last_error_message LIKE 'attempt limit reached%'")
             == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE attempt >= 1000000") == 0);
}

BOOST_AUTO_TEST_CASE(a_running_row_at_the_counter_limits_is_dead_lettered_by_the_rescue_and_the_rest_rescued) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Both running under claims that are gone: one at the counters' maximum
  // (charging it once more would overflow them), one ordinary.
  s.exec("INSERT INTO jobs_in (kind, state, attempt, error_count) "
         "VALUES ('k', 'running', 1000000, 1000000)");
  s.exec("INSERT INTO jobs_in (kind, state, attempt) VALUES ('k', 'running', 1)");
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  aw::storage::job_store store{opts};
  auto rescued = store.rescue(100);
  BOOST_REQUIRE_EQUAL(rescued.size(), 2u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE attempt = 1000000 "
                      "AND error_count = 1000000") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled' "
                      "AND error_count = 1") == 1);
}

BOOST_AUTO_TEST_SUITE_END()
