// A run longer than its deadline is cancelled and charged a failed attempt;
// when that was the last allowed attempt the job is dead-lettered.

#include <boost/test/unit_test.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

BOOST_AUTO_TEST_SUITE(deadline_test)

BOOST_AUTO_TEST_CASE(deadline_overrun_is_cancelled_and_rescued) {
  fault_env env{"deadline"};
  db_session db{env.url()};
  auto id = env.enqueue({"sleep", R"({"ms": 60000})", "--deadline", "1s",
                         "--max-attempts", "2"});
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  BOOST_TEST(db.scalar("SELECT deadline_ms" + where) == 1000);

  worker_timings t;
  auto a = env.start_worker("A", t);

  // First run: cancelled at its deadline, charged, rescheduled (2 s backoff).
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] { return db.scalar("SELECT error_count" + where) == 1; }, 60s),
    "the first overrun was not charged");
  auto shown = env.run({"jobs", "show", std::to_string(id), "--json"});
  BOOST_REQUIRE_EQUAL(shown.exit_code, 0);
  auto row = nlohmann::json::parse(shown.out);
  BOOST_TEST(row["error_count"] == 1);
  BOOST_TEST(row["attempt"] == 1);
  BOOST_TEST(row["state"] == "scheduled");
  BOOST_TEST(row["locked_by"].is_null());
  auto message = row["last_error_message"].get<std::string>();
  BOOST_TEST(contains(message, "deadline exceeded"), message);
  // The 60 s sleep was cut short: the run ended within seconds of its start.
  BOOST_TEST(db.scalar("SELECT extract(epoch FROM last_failed_at - created_at)::bigint"
                       + where)
             < 30);
  BOOST_TEST(contains(a->err(), "deadline of 1s exceeded, cancelling the run"));

  // Second run overruns too: that was its last attempt.
  BOOST_REQUIRE_MESSAGE(
    wait_until(
      [&] {
        return db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE original_job_id = "
                         + std::to_string(id))
               == 1;
      },
      60s),
    "the job was not dead-lettered after its second overrun");
  BOOST_TEST(db.scalar("SELECT count(*)" + where) == 0);
  auto listed = env.run({"dlq", "list", "--json"});
  BOOST_REQUIRE_EQUAL(listed.exit_code, 0);
  auto dead = nlohmann::json::parse(listed.out);
  BOOST_REQUIRE_EQUAL(dead.size(), 1u);
  BOOST_TEST(dead[0]["original_job_id"] == id);
  BOOST_TEST(dead[0]["kind"] == "sleep");
  BOOST_TEST(dead[0]["attempt"] == 2);
  BOOST_TEST(dead[0]["error_count"] == 2);
  BOOST_TEST(dead[0]["max_attempts"] == 2);
  auto last = dead[0]["last_error_message"].get<std::string>();
  BOOST_TEST(contains(last, "deadline exceeded"), last);
  BOOST_TEST(db.scalar("SELECT extract(epoch FROM failed_at - created_at)::bigint "
                       "FROM dead_letter_jobs")
             < 60);

  BOOST_TEST(a->running());
  a->signal(SIGTERM);
  auto code = a->wait_exit(30s);
  BOOST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0);
}

BOOST_AUTO_TEST_SUITE_END()
