// Every outcome a handler can return, against a real database: the
// transition it commits and the lifecycle event it fires (the spec's
// outcome -> event table), as hooks registered on the registry see them.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"
#include "lifecycle_helpers.hpp"

using namespace std::chrono_literals;
using aw::event_type;
using aw::test::contains;
using aw::test::dead_where;
using aw::test::job_where;
using aw::test::script;
using aw::test::step;

namespace {

constexpr auto patience = std::chrono::seconds{60};

/// A node running `act` (scripted) and `sentinel` (no-op) jobs, with a hook
/// on both kinds recording into `log`.
struct outcome_node {
  outcome_node(const aw::test::fresh_database& db, aw::test::event_log& log,
               int max_retries = 20)
    : db_(db), log_(log) {
    auto reg = std::make_shared<aw::registry>();
    reg->add_raw("act", [](const nlohmann::json& args, const aw::job_context& ctx) {
      return aw::test::scripted(args, ctx);
    });
    reg->add_raw("sentinel", [](const nlohmann::json&, const aw::job_context&) {});
    reg->on_event_kind("act", log.hook());
    reg->on_event_kind("sentinel", log.hook());
    auto cfg = db.config(4);
    cfg.worker.max_retries = max_retries;
    node = std::make_unique<aw::test::worker_node>(cfg, std::move(reg));
  }

  /// Returns once every event committed before the call has reached the
  /// hooks: a sentinel job's `completed` event comes from the same storage
  /// actor (pool_size 2: one connection records all outcomes) after any
  /// earlier outcome's event, and the dispatcher runs events in order.
  void flush_events() {
    auto id = aw::test::enqueue_one(db_, "sentinel");
    BOOST_REQUIRE_MESSAGE(log_.wait_for(id, event_type::completed, 1, patience),
                          "the sentinel job " << id << " never completed");
  }

  const aw::test::fresh_database& db_;
  aw::test::event_log& log_;
  std::unique_ptr<aw::test::worker_node> node;
};

/// The database's clock, as a literal to compare timestamps with.
std::string db_now(aw::test::db_session& s) {
  return "'" + s.text("SELECT clock_timestamp()::text") + "'::timestamptz";
}

bool state_is(aw::test::db_session& s, int64_t id, const std::string& state) {
  return s.text("SELECT state" + job_where(id)) == state;
}

} // namespace

BOOST_AUTO_TEST_SUITE(outcome_test)

BOOST_AUTO_TEST_CASE(completed_outcome_marks_the_job_completed_and_fires_completed_with_the_run_duration) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto slow = nlohmann::json{{"op", "complete"}, {"sleep_ms", 150}};
  auto id = aw::test::enqueue_one(db, "act", script({slow}));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  BOOST_TEST(state_is(s, id, "completed"));
  BOOST_TEST(s.check("SELECT finalized_at IS NOT NULL AND error_count = 0 "
                     "AND attempt = 1"
                     + job_where(id)));
  auto completed = log.of(id, event_type::completed);
  BOOST_REQUIRE_EQUAL(completed.size(), 1u);
  auto& e = completed.front();
  BOOST_TEST(e.kind == "act");
  // The handler slept 150 ms: the duration is the run's, not zero.
  BOOST_TEST(e.duration.count() >= 150);
  BOOST_TEST(e.duration.count() < 30000);
  // The event carries the committed (post-transition) row.
  BOOST_TEST(aw::test::field(e.job, "state") == "completed");
  BOOST_TEST(e.job.value("id", int64_t{0}) == id);
  BOOST_TEST(!aw::test::field(e.job, "finalized_at").empty());
  n.flush_events();
  // started + completed, nothing else.
  BOOST_TEST(log.of(id).size() == 2u);
  BOOST_TEST(log.count(id, event_type::started) == 1u);
}

BOOST_AUTO_TEST_CASE(retry_after_reschedules_after_the_delay_charges_an_attempt_and_fires_retried) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto before = db_now(s);
  auto id = aw::test::enqueue_one(
    db, "act", script({step("retry_after", 90000, "upstream busy")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::retried, 1, patience));
  auto w = job_where(id);
  BOOST_TEST(state_is(s, id, "scheduled"));
  BOOST_TEST(s.scalar("SELECT error_count" + w) == 1);
  BOOST_TEST(s.scalar("SELECT attempt" + w) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + w) == "upstream busy");
  // Exactly the requested delay after the failure, not the 2 s backoff.
  BOOST_TEST(s.check("SELECT run_at - last_failed_at = interval '90 seconds'" + w));
  BOOST_TEST(s.check("SELECT run_at BETWEEN " + before
                     + " + interval '90 seconds' AND now() + interval '90 seconds'"
                     + w));
  BOOST_TEST(s.check("SELECT locked_by IS NULL" + w));
  auto retried = log.of(id, event_type::retried);
  BOOST_REQUIRE_EQUAL(retried.size(), 1u);
  BOOST_TEST(retried[0].message == "upstream busy");
  BOOST_TEST(aw::test::field(retried[0].job, "state") == "scheduled");
  BOOST_TEST(retried[0].job.value("error_count", -1) == 1);
  n.flush_events();
  BOOST_TEST(log.count(id, event_type::exhausted) == 0u);
  BOOST_TEST(log.count(id, event_type::completed) == 0u);
  BOOST_TEST(log.of(id).size() == 2u); // started, retried
}

BOOST_AUTO_TEST_CASE(retry_after_on_the_last_attempt_dead_letters_and_fires_exhausted) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  aw::insert_options once;
  once.max_attempts = 1;
  auto id = aw::test::enqueue_one(
    db, "act", script({step("retry_after", 1000, "still busy")}), once);
  BOOST_REQUIRE(log.wait_for(id, event_type::exhausted, 1, patience));
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(id)) == 0);
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(id)) == 1);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_where(id)) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + dead_where(id)) == "still busy");
  auto e = log.of(id, event_type::exhausted).at(0);
  BOOST_TEST(e.message == "still busy");
  // The row of an exhausted event is the dead letter row.
  BOOST_TEST(e.job.value("original_job_id", int64_t{0}) == id);
  BOOST_TEST(e.job.value("error_count", -1) == 1);
  n.flush_events();
  BOOST_TEST(log.count(id, event_type::retried) == 0u);
  BOOST_TEST(log.of(id).size() == 2u); // started, exhausted
}

BOOST_AUTO_TEST_CASE(snooze_reschedules_after_the_delay_without_charging_and_fires_no_event) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto before = db_now(s);
  auto id = aw::test::enqueue_one(db, "act", script({step("snooze", 120000)}));
  auto w = job_where(id);
  BOOST_REQUIRE(aw::test::wait_until(
    [&] { return state_is(s, id, "scheduled"); }, patience));
  auto after = db_now(s);
  BOOST_TEST(s.scalar("SELECT error_count" + w) == 0);
  BOOST_TEST(s.check("SELECT last_error_message IS NULL AND last_failed_at IS NULL "
                     "AND locked_by IS NULL"
                     + w));
  BOOST_TEST(s.check("SELECT run_at BETWEEN " + before
                     + " + interval '120 seconds' AND " + after
                     + " + interval '120 seconds'" + w));
  // Every event committed before this point has reached the hooks: only
  // the claim's `started` fired for the snoozed job.
  n.flush_events();
  auto events = log.of(id);
  BOOST_REQUIRE_EQUAL(events.size(), 1u);
  BOOST_TEST((events[0].type == event_type::started));
}

BOOST_AUTO_TEST_CASE(cancel_marks_the_job_cancelled_with_its_reason_and_fires_cancelled) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto id = aw::test::enqueue_one(
    db, "act", script({step("cancel", 0, "order was withdrawn")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::cancelled, 1, patience));
  auto w = job_where(id);
  BOOST_TEST(state_is(s, id, "cancelled"));
  BOOST_TEST(s.text("SELECT last_error_message" + w) == "order was withdrawn");
  BOOST_TEST(s.check("SELECT finalized_at IS NOT NULL AND error_count = 0" + w));
  auto e = log.of(id, event_type::cancelled).at(0);
  BOOST_TEST(e.message == "order was withdrawn");
  BOOST_TEST(aw::test::field(e.job, "state") == "cancelled");
  n.flush_events();
  BOOST_TEST(log.of(id).size() == 2u); // started, cancelled
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(wait_for_callback_parks_the_job_with_a_uuid_and_timeout_and_fires_waiting_for_callback) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto before = db_now(s);
  auto id = aw::test::enqueue_one(db, "act", script({step("wait", 3'600'000)}));
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto after = db_now(s);
  auto w = job_where(id);
  BOOST_TEST(state_is(s, id, "waiting_external"));
  auto callback_id = s.text("SELECT callback_id::text" + w);
  BOOST_TEST_MESSAGE("callback_id " << callback_id);
  BOOST_TEST(aw::test::is_uuid(callback_id));
  BOOST_TEST(s.check("SELECT callback_timeout_at BETWEEN " + before
                     + " + interval '1 hour' AND " + after
                     + " + interval '1 hour'" + w));
  BOOST_TEST(s.check("SELECT locked_by IS NULL AND callback_result IS NULL "
                     "AND error_count = 0 AND finalized_at IS NULL"
                     + w));
  auto e = log.of(id, event_type::waiting_for_callback).at(0);
  // The hook gets the id in the committed row: that is how it hands it on.
  BOOST_TEST(aw::test::field(e.job, "callback_id") == callback_id);
  BOOST_TEST(aw::test::field(e.job, "state") == "waiting_external");
  n.flush_events();
  BOOST_TEST(log.of(id).size() == 2u); // started, waiting_for_callback
  // Each park gets a fresh id.
  auto other = aw::test::enqueue_one(db, "act", script({step("wait", 3'600'000)}));
  BOOST_REQUIRE(log.wait_for(other, event_type::waiting_for_callback, 1, patience));
  auto other_callback = s.text("SELECT callback_id::text" + job_where(other));
  BOOST_TEST(aw::test::is_uuid(other_callback));
  BOOST_TEST(other_callback != callback_id);
}

BOOST_AUTO_TEST_CASE(retryable_throw_reschedules_with_backoff_and_fires_retried_with_the_error) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto id = aw::test::enqueue_one(db, "act",
                                  script({step("throw", 0, "flaky upstream")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::retried, 1, patience));
  // The retry may already be due again (2 s) on a slow machine: check the
  // committed row the event carries, and the table for what lasts.
  auto e = log.of(id, event_type::retried).at(0);
  BOOST_TEST(e.message == "flaky upstream");
  BOOST_TEST(aw::test::field(e.job, "state") == "scheduled");
  BOOST_TEST(e.job.value("error_count", -1) == 1);
  BOOST_TEST(aw::test::field(e.job, "last_error_message") == "flaky upstream");
  BOOST_TEST(aw::test::field(e.job, "locked_by").empty());
  // The usual backoff after the first failure: 2 s.
  BOOST_TEST(s.check("SELECT '" + aw::test::field(e.job, "run_at")
                     + "'::timestamptz - '"
                     + aw::test::field(e.job, "last_failed_at")
                     + "'::timestamptz = interval '2 seconds'"));
  auto w = job_where(id);
  BOOST_TEST(s.scalar("SELECT error_count" + w) >= 1);
  BOOST_TEST(s.text("SELECT last_error_message" + w) == "flaky upstream");
  BOOST_TEST(log.count(id, event_type::exhausted) == 0u);
}

BOOST_AUTO_TEST_CASE(retryable_throw_on_the_last_attempt_fires_exhausted) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  aw::insert_options twice;
  twice.max_attempts = 2;
  auto id = aw::test::enqueue_one(db, "act",
                                  script({step("throw", 0, "broken again")}),
                                  twice);
  BOOST_REQUIRE(log.wait_for(id, event_type::retried, 1, patience));
  // Skip the backoff.
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id = " + std::to_string(id));
  BOOST_REQUIRE(log.wait_for(id, event_type::exhausted, 1, patience));
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(id)) == 0);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_where(id)) == 2);
  BOOST_TEST(s.scalar("SELECT attempt" + dead_where(id)) == 2);
  auto e = log.of(id, event_type::exhausted).at(0);
  BOOST_TEST(e.message == "broken again");
  BOOST_TEST(e.job.value("attempt", 0) == 2);
  n.flush_events();
  BOOST_TEST(log.count(id, event_type::retried) == 1u);
  BOOST_TEST(log.count(id, event_type::started) == 2u);
}

BOOST_AUTO_TEST_CASE(terminal_error_dead_letters_at_once_and_fires_exhausted) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  auto id = aw::test::enqueue_one(db, "act",
                                  script({step("terminal", 0, "card declined")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::exhausted, 1, patience));
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(id)) == 0);
  BOOST_TEST(s.scalar("SELECT attempt" + dead_where(id)) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + dead_where(id)) == "card declined");
  auto e = log.of(id, event_type::exhausted).at(0);
  BOOST_TEST(e.message == "card declined");
  BOOST_TEST(e.job.value("original_job_id", int64_t{0}) == id);
  n.flush_events();
  BOOST_TEST(log.count(id, event_type::retried) == 0u);
  BOOST_TEST(log.of(id).size() == 2u); // started, exhausted
}

BOOST_AUTO_TEST_CASE(started_fires_once_per_claim_with_the_running_row) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  outcome_node n{db, log};
  // Two short retry_afters, then success: three claims.
  auto id = aw::test::enqueue_one(
    db, "act",
    script({step("retry_after", 50), step("retry_after", 50), step("complete")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  n.flush_events();
  auto started = log.of(id, event_type::started);
  BOOST_REQUIRE_EQUAL(started.size(), 3u);
  std::vector<int> attempts;
  for (auto& e : started) {
    attempts.push_back(e.job.value("attempt", 0));
    BOOST_TEST(aw::test::field(e.job, "state") == "running");
    BOOST_TEST(!aw::test::field(e.job, "locked_by").empty());
  }
  std::sort(attempts.begin(), attempts.end());
  BOOST_TEST(attempts == (std::vector<int>{1, 2, 3}));
  BOOST_TEST(log.count(id, event_type::retried) == 2u);
  BOOST_TEST(log.count(id, event_type::completed) == 1u);
  BOOST_TEST(s.scalar("SELECT attempt" + job_where(id)) == 3);
  BOOST_TEST(s.scalar("SELECT error_count" + job_where(id)) == 2);
}

namespace {

struct order_args {
  std::string customer;
  int amount = 0;
};

void from_json(const nlohmann::json& j, order_args& a) {
  j.at("customer").get_to(a.customer);
  j.at("amount").get_to(a.amount);
}

} // namespace

BOOST_AUTO_TEST_CASE(hooks_are_keyed_by_kind_and_typed_hooks_get_parsed_args) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  std::mutex mtx;
  std::vector<std::pair<aw::event_type, order_args>> typed;
  aw::test::event_log other_kind;
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("order", [](const nlohmann::json&, const aw::job_context&) {});
  reg->add_raw("audit", [](const nlohmann::json&, const aw::job_context&) {});
  reg->on_event<order_args>("order", [&](const aw::typed_event<order_args>& e) {
    std::lock_guard<std::mutex> guard{mtx};
    typed.emplace_back(e.type, e.args);
  });
  reg->on_event_kind("audit", other_kind.hook());
  auto count_typed = [&] {
    std::lock_guard<std::mutex> guard{mtx};
    return typed.size();
  };
  aw::test::worker_node node{db.config(4), std::move(reg)};
  auto id = aw::test::enqueue_one(db, "order",
                                  {{"customer", "ada"}, {"amount", 42}});
  BOOST_REQUIRE(aw::test::wait_until([&] { return count_typed() == 2; }, patience));
  BOOST_TEST(state_is(s, id, "completed"));
  std::lock_guard<std::mutex> guard{mtx};
  for (auto& [type, args] : typed) {
    BOOST_TEST(args.customer == "ada");
    BOOST_TEST(args.amount == 42);
  }
  BOOST_TEST((typed[0].first == event_type::started
              || typed[1].first == event_type::started));
  BOOST_TEST((typed[0].first == event_type::completed
              || typed[1].first == event_type::completed));
  // The audit hook never saw an order event.
  BOOST_TEST(other_kind.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
