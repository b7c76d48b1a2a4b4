// Failure handling against a real database: the retry backoff written by
// job_store, and dead-lettering as an in-process runtime does it with the
// built-in kinds (`fail`, `sleep`).

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/app/builtin_kinds.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;
using aw::test::contains;

namespace {

constexpr auto patience = std::chrono::seconds{60};

std::shared_ptr<aw::registry> builtin_registry() {
  auto reg = std::make_shared<aw::registry>();
  aw::register_builtin_kinds(*reg);
  return reg;
}

/// A runtime config that gives up after `max_retries` failed attempts.
aw::runtime_config retry_config(const aw::test::fresh_database& db,
                                int max_retries = 2) {
  auto cfg = db.config();
  cfg.worker.max_retries = max_retries;
  return cfg;
}

int64_t enqueue_one(const aw::test::fresh_database& db, const std::string& kind,
                    const nlohmann::json& args,
                    const aw::insert_options& opts = {}) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, kind, args, opts);
  tx.commit();
  return id;
}

/// Waits until `n` jobs are dead-lettered. Every check makes retries due at
/// once, so the test never waits out a backoff.
bool wait_for_dead_letters(aw::test::db_session& s, int64_t n) {
  return aw::test::wait_until(
    [&] {
      s.exec("UPDATE jobs_in SET run_at = now() "
             "WHERE state = 'scheduled' AND run_at > now()");
      return s.scalar("SELECT count(*) FROM dead_letter_jobs") >= n;
    },
    patience);
}

std::string dead_letter_of(int64_t id) {
  return " FROM dead_letter_jobs WHERE original_job_id = " + std::to_string(id);
}

} // namespace

BOOST_AUTO_TEST_SUITE(retry_test)

BOOST_AUTO_TEST_CASE(retryable_failure_reschedules_after_exponential_backoff) {
  aw::test::fresh_database db;
  // Four jobs whose earlier failures were 0, 1, 2 and 5.
  const std::vector<int> before{0, 1, 2, 5};
  std::vector<int64_t> ids;
  for (auto errors : before) {
    auto id = enqueue_one(db, "noop", {});
    db.exec("UPDATE jobs_in SET error_count = " + std::to_string(errors)
            + " WHERE id = " + std::to_string(id));
    ids.push_back(id);
  }
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  opts.max_retries = 20;
  aw::storage::job_store store{opts};
  auto claimed = store.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  std::vector<aw::job_outcome> outcomes;
  for (size_t i = 0; i < ids.size(); ++i)
    outcomes.push_back(aw::test::outcome(claimed, ids[i],
                                         aw::outcome_kind::retryable_failure,
                                         "boom " + std::to_string(i)));
  for (auto r : aw::test::results(store.finish(outcomes)))
    BOOST_TEST((r == aw::finish_result::applied));
  aw::test::db_session s{db.url};
  for (size_t i = 0; i < ids.size(); ++i) {
    auto where = " FROM jobs_live WHERE id = " + std::to_string(ids[i]);
    BOOST_TEST_CONTEXT("job with " << before[i] << " earlier failure(s)") {
      BOOST_TEST(s.text("SELECT state" + where) == "scheduled");
      BOOST_TEST(s.scalar("SELECT error_count" + where) == before[i] + 1);
      BOOST_TEST(s.text("SELECT last_error_message" + where)
                 == "boom " + std::to_string(i));
      BOOST_TEST(s.check("SELECT last_failed_at BETWEEN now() - interval "
                         "'1 minute' AND now()"
                         + where));
      BOOST_TEST(s.check("SELECT locked_by IS NULL AND locked_at IS NULL" + where));
      // 2^(errors + 1) seconds: 2 s, 4 s, 8 s, 64 s.
      auto seconds = std::stod(
        s.text("SELECT extract(epoch FROM run_at - last_failed_at)" + where));
      BOOST_TEST(std::abs(seconds - std::pow(2.0, before[i] + 1)) < 0.01);
    }
  }
  // Not claimable before the backoff passes.
  BOOST_TEST(store.claim("default", 10).jobs.empty());
}

BOOST_AUTO_TEST_CASE(job_is_dead_lettered_after_exactly_max_retries_plus_one_runs) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "fail", {{"message", "always broken"}});
  aw::test::db_session s{db.url};
  {
    aw::test::worker_node node{retry_config(db, 2), builtin_registry()};
    BOOST_REQUIRE(wait_for_dead_letters(s, 1));
  }
  // Three runs: the first plus max_retries = 2 retries.
  BOOST_TEST(s.scalar("SELECT attempt" + dead_letter_of(id)) == 3);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_letter_of(id)) == 3);
  BOOST_TEST(s.text("SELECT last_error_message" + dead_letter_of(id))
             == "always broken");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(job_with_max_attempts_n_runs_at_most_n_times) {
  aw::test::fresh_database db;
  aw::insert_options once;
  once.max_attempts = 1;
  aw::insert_options four;
  four.max_attempts = 4;
  // The job's own limit wins over the worker's max_retries (2) both ways.
  auto once_id = enqueue_one(db, "fail", nlohmann::json::object(), once);
  auto four_id = enqueue_one(db, "fail", nlohmann::json::object(), four);
  aw::test::db_session s{db.url};
  {
    aw::test::worker_node node{retry_config(db, 2), builtin_registry()};
    BOOST_REQUIRE(wait_for_dead_letters(s, 2));
  }
  BOOST_TEST(s.scalar("SELECT attempt" + dead_letter_of(once_id)) == 1);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_letter_of(once_id)) == 1);
  BOOST_TEST(s.scalar("SELECT max_attempts" + dead_letter_of(once_id)) == 1);
  BOOST_TEST(s.scalar("SELECT attempt" + dead_letter_of(four_id)) == 4);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_letter_of(four_id)) == 4);
  BOOST_TEST(s.scalar("SELECT max_attempts" + dead_letter_of(four_id)) == 4);
  // Both failed by running, not by being rejected before the handler ran.
  BOOST_TEST(s.text("SELECT last_error_message" + dead_letter_of(once_id))
             == "failed on purpose");
  BOOST_TEST(s.text("SELECT last_error_message" + dead_letter_of(four_id))
             == "failed on purpose");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(job_that_fails_then_succeeds_completes_on_its_retry) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "fail", {{"times", 2}, {"message", "flaky"}});
  aw::test::db_session s{db.url};
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  {
    aw::test::worker_node node{retry_config(db, 5), builtin_registry()};
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        s.exec("UPDATE jobs_in SET run_at = now() "
               "WHERE state = 'scheduled' AND run_at > now()");
        return s.text("SELECT state" + where) == "completed";
      },
      patience));
  }
  BOOST_TEST(s.scalar("SELECT attempt" + where) == 3);
  BOOST_TEST(s.scalar("SELECT error_count" + where) == 2);
  BOOST_TEST(s.text("SELECT last_error_message" + where) == "flaky");
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(terminal_failure_goes_straight_to_the_dead_letter_queue) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "fail",
                        {{"terminal", true}, {"message", "card declined"}});
  aw::test::db_session s{db.url};
  {
    aw::test::worker_node node{retry_config(db, 5), builtin_registry()};
    BOOST_REQUIRE(wait_for_dead_letters(s, 1));
  }
  BOOST_TEST(s.scalar("SELECT attempt" + dead_letter_of(id)) == 1);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_letter_of(id)) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + dead_letter_of(id))
             == "card declined");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(malformed_args_are_dead_lettered_naming_kind_and_parse_error) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "sleep", {{"ms", "x"}});
  aw::test::db_session s{db.url};
  {
    aw::test::worker_node node{retry_config(db, 5), builtin_registry()};
    BOOST_REQUIRE(wait_for_dead_letters(s, 1));
  }
  auto message = s.text("SELECT last_error_message" + dead_letter_of(id));
  BOOST_TEST_MESSAGE("message: " << message);
  BOOST_TEST(contains(message, "malformed args for job kind 'sleep'"));
  // nlohmann's parse error, as the handler's from_json raised it.
  BOOST_TEST(contains(message, "type must be number, but is string"));
  BOOST_TEST(s.scalar("SELECT attempt" + dead_letter_of(id)) == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(dead_letter_row_carries_the_original_job) {
  aw::test::fresh_database db;
  aw::insert_options opts;
  opts.queue = "billing";
  opts.priority = 3;
  opts.max_attempts = 5;
  opts.metadata = {{"tenant", "acme"}};
  opts.tags = {"invoice", "eu"};
  auto id = enqueue_one(db, "fail", {{"terminal", true}, {"message", "nope"}},
                        opts);
  // An old created_at, so the copy cannot be mistaken for now().
  db.exec("UPDATE jobs_in SET created_at = '2020-01-01 00:00:00+00'");
  auto cfg = retry_config(db, 5);
  aw::queue_config billing;
  billing.name = "billing";
  billing.concurrency = 2;
  cfg.queues.push_back(billing);
  aw::test::db_session s{db.url};
  {
    aw::test::worker_node node{cfg, builtin_registry()};
    BOOST_REQUIRE(wait_for_dead_letters(s, 1));
  }
  auto d = dead_letter_of(id);
  BOOST_TEST(s.scalar("SELECT count(*)" + d) == 1);
  BOOST_TEST(s.text("SELECT kind" + d) == "fail");
  BOOST_TEST(s.text("SELECT queue" + d) == "billing");
  BOOST_TEST(s.check("SELECT args = '{\"terminal\": true, \"message\": \"nope\"}'::jsonb" + d));
  BOOST_TEST(s.scalar("SELECT priority" + d) == 3);
  BOOST_TEST(s.scalar("SELECT attempt" + d) == 1);
  BOOST_TEST(s.scalar("SELECT max_attempts" + d) == 5);
  BOOST_TEST(s.scalar("SELECT error_count" + d) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + d) == "nope");
  BOOST_TEST(s.check("SELECT created_at = '2020-01-01 00:00:00+00'::timestamptz" + d));
  BOOST_TEST(s.check("SELECT failed_at BETWEEN now() - interval '2 minutes' AND now()" + d));
  BOOST_TEST(s.check("SELECT metadata = '{\"tenant\": \"acme\"}'::jsonb" + d));
  BOOST_TEST(s.check("SELECT tags = ARRAY['invoice', 'eu']::text[]" + d));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE id = " + std::to_string(id)) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
