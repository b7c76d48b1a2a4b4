// External callbacks against a real database: a parked job resolved
// through the worker runtime (complete / fail / retry / resume /
// resolve_callback, each returning the outcome it applied)
// with its hooks, refused resolutions, resolution through the CLI (no
// hooks in the worker), and the rescue of callbacks that time out.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include <unistd.h>

#include "actor_worker/app/builtin_kinds.hpp"
#include "actor_worker/messages/error.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/callbacks.hpp"
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

/// A node with the built-in kinds (await_callback among them), a scripted
/// `act` kind, and a hook recording every event of both into `log`.
std::unique_ptr<aw::test::worker_node>
callback_node(const aw::runtime_config& cfg, aw::test::event_log& log) {
  auto reg = std::make_shared<aw::registry>();
  aw::register_builtin_kinds(*reg);
  reg->add_raw("act", [](const nlohmann::json& args, const aw::job_context& ctx) {
    return aw::test::scripted(args, ctx);
  });
  reg->on_event_kind("await_callback", log.hook());
  reg->on_event_kind("act", log.hook());
  return std::make_unique<aw::test::worker_node>(cfg, std::move(reg));
}

/// Enqueues an await_callback job and waits until it is parked; returns
/// {job id, callback id}.
std::pair<int64_t, std::string> park(const aw::test::fresh_database& db,
                                     aw::test::event_log& log,
                                     const std::string& timeout = "1h",
                                     const aw::insert_options& opts = {}) {
  auto id = aw::test::enqueue_one(db, "await_callback", {{"timeout", timeout}},
                                  opts);
  BOOST_REQUIRE_MESSAGE(
    log.wait_for(id, event_type::waiting_for_callback, 1, patience),
    "job " << id << " never parked");
  auto e = log.of(id, event_type::waiting_for_callback).at(0);
  auto callback_id = aw::test::field(e.job, "callback_id");
  BOOST_REQUIRE(aw::test::is_uuid(callback_id));
  return {id, callback_id};
}

/// Calls `fn`, which must throw storage::callback_error; returns it.
template <class F>
std::optional<aw::storage::callback_error> refused(F fn) {
  try {
    fn();
  } catch (const aw::storage::callback_error& e) {
    return e;
  }
  return std::nullopt;
}

/// A snapshot of a job row, to show a refused resolution changed nothing.
std::string row_text(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT coalesce((SELECT to_jsonb(j)::text FROM jobs_live AS j "
                "WHERE id = "
                + std::to_string(id) + "), 'gone')");
}

} // namespace

BOOST_AUTO_TEST_SUITE(callback_test)

BOOST_AUTO_TEST_CASE(complete_external_completes_the_job_stores_the_payload_and_fires_completed_with_zero_duration) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto [id, callback_id] = park(db, log);
  BOOST_TEST(s.text("SELECT state" + job_where(id)) == "waiting_external");
  node->rt().complete_external(callback_id, {{"approved", true}, {"by", "ops"}});
  // Committed before complete_external returned.
  auto w = job_where(id);
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.check("SELECT callback_result = '{\"approved\": true, \"by\": \"ops\"}'::jsonb"
                     + w));
  BOOST_TEST(s.check("SELECT finalized_at IS NOT NULL AND callback_timeout_at IS NULL "
                     "AND error_count = 0"
                     + w));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto e = log.of(id, event_type::completed).at(0);
  BOOST_TEST(e.duration.count() == 0);
  BOOST_TEST(aw::test::field(e.job, "state") == "completed");
  BOOST_TEST(e.job.at("callback_result") == (nlohmann::json{{"approved", true}, {"by", "ops"}}));
  // Resuming fires no `started`: only the first claim did.
  BOOST_TEST(log.count(id, event_type::started) == 1u);
}

BOOST_AUTO_TEST_CASE(fail_external_dead_letters_the_job_and_fires_exhausted) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto [id, callback_id] = park(db, log);
  node->rt().fail_external(callback_id, "payment provider declined");
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(id)) == 0);
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(id)) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + dead_where(id))
             == "payment provider declined");
  BOOST_TEST(s.scalar("SELECT error_count" + dead_where(id)) == 1);
  BOOST_REQUIRE(log.wait_for(id, event_type::exhausted, 1, patience));
  auto e = log.of(id, event_type::exhausted).at(0);
  BOOST_TEST(e.message == "payment provider declined");
  BOOST_TEST(e.job.value("original_job_id", int64_t{0}) == id);
  BOOST_TEST(log.count(id, event_type::completed) == 0u);
}

BOOST_AUTO_TEST_CASE(retry_external_makes_the_job_available_uncharged_and_it_runs_again) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  // Parks on its first run, completes on the second.
  auto id = aw::test::enqueue_one(
    db, "act", script({step("wait", 3'600'000), step("complete")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto callback_id = s.text("SELECT callback_id::text" + job_where(id));
  node->rt().retry_external(callback_id, {{"hint", "try again"}});
  BOOST_REQUIRE(log.wait_for(id, event_type::retried, 1, patience));
  auto retried = log.of(id, event_type::retried).at(0);
  // The resolution's committed row: available again at once, not charged.
  BOOST_TEST(aw::test::field(retried.job, "state") == "available");
  BOOST_TEST(retried.job.value("error_count", -1) == 0);
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto w = job_where(id);
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.scalar("SELECT attempt" + w) == 2);
  BOOST_TEST(s.scalar("SELECT error_count" + w) == 0);
  BOOST_TEST(s.check("SELECT callback_result = '{\"hint\": \"try again\"}'::jsonb" + w));
  BOOST_TEST(log.count(id, event_type::started) == 2u);
  // The second run's completion has the handler's duration path, not the
  // callback's: it ran.
  BOOST_TEST(log.count(id, event_type::completed) == 1u);
}

BOOST_AUTO_TEST_CASE(resolve_callback_stores_the_payload_and_applies_the_default_action) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto& rt = node->rt();
  auto [complete_id, complete_cb] = park(db, log);
  auto [fail_id, fail_cb] = park(db, log);
  auto retry_id = aw::test::enqueue_one(
    db, "act", script({step("wait", 3'600'000), step("complete")}));
  BOOST_REQUIRE(log.wait_for(retry_id, event_type::waiting_for_callback, 1, patience));
  auto retry_cb = s.text("SELECT callback_id::text" + job_where(retry_id));

  // An unknown action is refused before anything changes.
  auto before = row_text(s, complete_id);
  BOOST_CHECK_THROW(rt.resolve_callback(complete_cb, {{"x", 1}}, "approve"),
                    std::invalid_argument);
  BOOST_TEST(row_text(s, complete_id) == before);

  auto completed = rt.resolve_callback(complete_cb, {{"status", "ok"}}, "complete");
  // It returns the action it applied and the committed row.
  BOOST_TEST((completed.action == aw::storage::callback_action::complete));
  BOOST_TEST(completed.row.value("id", int64_t{0}) == complete_id);
  BOOST_TEST(completed.row.value("state", std::string{}) == "completed");
  BOOST_TEST(completed.row["callback_result"] == (nlohmann::json{{"status", "ok"}}));
  BOOST_TEST(s.text("SELECT state" + job_where(complete_id)) == "completed");
  BOOST_TEST(s.check("SELECT callback_result = '{\"status\": \"ok\"}'::jsonb"
                     + job_where(complete_id)));
  BOOST_REQUIRE(log.wait_for(complete_id, event_type::completed, 1, patience));
  BOOST_TEST(log.of(complete_id, event_type::completed).at(0).duration.count() == 0);

  // For "fail" the payload's "error" is the message.
  auto failed = rt.resolve_callback(fail_cb, {{"error", "fraud suspected"}}, "fail");
  // For fail, the committed row is the dead letter.
  BOOST_TEST((failed.action == aw::storage::callback_action::fail));
  BOOST_TEST(failed.row.value("original_job_id", int64_t{0}) == fail_id);
  BOOST_TEST(failed.row.value("last_error_message", std::string{})
             == "fraud suspected");
  BOOST_TEST(s.text("SELECT last_error_message" + dead_where(fail_id))
             == "fraud suspected");
  BOOST_REQUIRE(log.wait_for(fail_id, event_type::exhausted, 1, patience));
  BOOST_TEST(log.of(fail_id, event_type::exhausted).at(0).message
             == "fraud suspected");

  auto retried = rt.resolve_callback(retry_cb, {{"again", true}}, "retry");
  BOOST_TEST((retried.action == aw::storage::callback_action::retry));
  BOOST_TEST(retried.row.value("state", std::string{}) == "available");
  BOOST_REQUIRE(log.wait_for(retry_id, event_type::retried, 1, patience));
  BOOST_REQUIRE(log.wait_for(retry_id, event_type::completed, 1, patience));
  BOOST_TEST(s.scalar("SELECT attempt" + job_where(retry_id)) == 2);
  BOOST_TEST(s.check("SELECT callback_result = '{\"again\": true}'::jsonb"
                     + job_where(retry_id)));
}

BOOST_AUTO_TEST_CASE(resume_external_puts_the_job_back_uncharged_with_no_event_of_its_own_then_started_and_its_outcome) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto& rt = node->rt();
  // Parks on its first run, completes on the second.
  auto id = aw::test::enqueue_one(
    db, "act", script({step("wait", 3'600'000), step("complete")}));
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto callback_id = s.text("SELECT callback_id::text" + job_where(id));
  auto resumed = rt.resume_external(callback_id, {{"approved", true}});
  BOOST_TEST((resumed.action == aw::storage::callback_action::resume));
  BOOST_TEST(resumed.row.value("id", int64_t{0}) == id);
  BOOST_TEST(resumed.row.value("error_count", -1) == 0);
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto w = job_where(id);
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.scalar("SELECT attempt" + w) == 2);
  BOOST_TEST(s.scalar("SELECT error_count" + w) == 0);
  BOOST_TEST(s.check("SELECT callback_result = '{\"approved\": true}'::jsonb" + w));
  // started, waiting_for_callback, then started and completed: the resume
  // itself fired nothing (no retried).
  BOOST_TEST(log.count(id, event_type::retried) == 0u);
  BOOST_TEST(log.count(id, event_type::started) == 2u);
  BOOST_TEST(log.of(id).size() == 4u);
  // resolve_callback takes "resume" as its default action too.
  auto other = aw::test::enqueue_one(
    db, "act", script({step("wait", 3'600'000), step("complete")}));
  BOOST_REQUIRE(log.wait_for(other, event_type::waiting_for_callback, 1, patience));
  auto other_cb = s.text("SELECT callback_id::text" + job_where(other));
  auto applied = rt.resolve_callback(other_cb, {{"n", 1}}, "resume");
  BOOST_TEST((applied.action == aw::storage::callback_action::resume));
  BOOST_REQUIRE(log.wait_for(other, event_type::completed, 1, patience));
  BOOST_TEST(log.count(other, event_type::retried) == 0u);
}

BOOST_AUTO_TEST_CASE(resolving_a_callback_twice_is_refused_as_not_waiting_and_changes_nothing) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto& rt = node->rt();
  auto [id, callback_id] = park(db, log);
  rt.complete_external(callback_id, {{"n", 1}});
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto after_first = row_text(s, id);
  auto cb = callback_id;
  std::vector<std::pair<std::string, std::function<void()>>> again = {
    {"complete", [&] { rt.complete_external(cb, {{"n", 2}}); }},
    {"fail", [&] { rt.fail_external(cb, "late"); }},
    {"retry", [&] { rt.retry_external(cb, {{"n", 3}}); }},
    {"resolve", [&] { rt.resolve_callback(cb, {{"n", 4}}, "complete"); }},
  };
  for (auto& [name, fn] : again) {
    BOOST_TEST_CONTEXT(name) {
      auto err = refused(fn);
      BOOST_REQUIRE(err.has_value());
      BOOST_TEST((err->code() == aw::ec::callback_not_waiting));
      BOOST_TEST_MESSAGE(err->what());
      BOOST_TEST(contains(err->what(), "job " + std::to_string(id)));
      BOOST_TEST(contains(err->what(), "state completed"));
      BOOST_TEST(row_text(s, id) == after_first);
    }
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  // A later, unrelated resolution's events arrive; none for the refused ones.
  auto [other, other_cb] = park(db, log);
  rt.complete_external(other_cb);
  BOOST_REQUIRE(log.wait_for(other, event_type::completed, 1, patience));
  BOOST_TEST(log.count(id, event_type::completed) == 1u);
  BOOST_TEST(log.count(id, event_type::retried) == 0u);
  BOOST_TEST(log.count(id, event_type::exhausted) == 0u);
}

BOOST_AUTO_TEST_CASE(resolving_a_callback_that_failed_its_job_is_refused_as_already_resolved) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto& rt = node->rt();
  auto [id, callback_id] = park(db, log);
  auto failed = rt.fail_external(callback_id, "declined");
  BOOST_TEST(failed.row.value("callback_id", std::string{}) == callback_id);
  auto err = refused([&] { rt.complete_external(callback_id); });
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST((err->code() == aw::ec::callback_not_waiting));
  BOOST_TEST(contains(err->what(), "job " + std::to_string(id)), err->what());
  BOOST_TEST(contains(err->what(), "state dead_lettered"), err->what());
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 1);
}

BOOST_AUTO_TEST_CASE(unknown_or_malformed_callback_id_is_refused_as_not_found) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto& rt = node->rt();
  auto [id, callback_id] = park(db, log);
  auto before = row_text(s, id);
  const std::vector<std::string> bad = {
    "7c9e6679-7425-40de-944b-e07fc1f90ae7", // well-formed, nobody's
    "not-a-uuid",
    "",
    "'; DELETE FROM jobs_in; --",
    callback_id + "0",
  };
  for (auto& cb : bad) {
    BOOST_TEST_CONTEXT("callback id '" << cb << "'") {
      for (auto* action : {"complete", "fail", "retry"}) {
        auto err = refused([&] {
          rt.resolve_callback(cb, {{"x", 1}}, action);
        });
        BOOST_REQUIRE(err.has_value());
        BOOST_TEST((err->code() == aw::ec::callback_not_found));
      }
    }
  }
  BOOST_TEST(row_text(s, id) == before);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 1);
}

BOOST_AUTO_TEST_CASE(cli_resolution_changes_the_job_but_fires_no_hook_in_the_worker) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto [id, callback_id] = park(db, log);
  auto [failed, failed_cb] = park(db, log);

  auto r = aw::test::run_binary("callback complete " + callback_id
                                  + " '{\"approved\": true}'",
                                db.url);
  BOOST_TEST_MESSAGE("stdout: " << r.out << "stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(contains(r.out, "job " + std::to_string(id) + ": completed"));
  BOOST_TEST(s.text("SELECT state" + job_where(id)) == "completed");
  BOOST_TEST(s.check("SELECT callback_result = '{\"approved\": true}'::jsonb"
                     + job_where(id)));

  r = aw::test::run_binary("callback fail " + failed_cb
                             + " '{\"error\": \"rejected by ops\"}'",
                           db.url);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(s.text("SELECT last_error_message" + dead_where(failed))
             == "rejected by ops");

  // `callback resume` puts a waiting job back with its payload.
  auto resumable = aw::test::enqueue_one(
    db, "act", script({step("wait", 3'600'000), step("complete")}));
  BOOST_REQUIRE(log.wait_for(resumable, event_type::waiting_for_callback, 1, patience));
  auto resumable_cb = s.text("SELECT callback_id::text" + job_where(resumable));
  r = aw::test::run_binary("callback resume " + resumable_cb + " '{\"go\": 1}'",
                           db.url);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(contains(r.out, "job " + std::to_string(resumable) + ": resumed"));
  BOOST_REQUIRE(log.wait_for(resumable, event_type::completed, 1, patience));
  BOOST_TEST(s.check("SELECT callback_result = '{\"go\": 1}'::jsonb"
                     + job_where(resumable)));

  // Resolving again through the CLI is refused, exit 1.
  r = aw::test::run_binary("callback complete " + callback_id, db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "no longer waiting"));

  // A resolution through this node afterwards does reach the hooks; by the
  // time its event arrives, nothing was dispatched for the CLI's.
  auto [other, other_cb] = park(db, log);
  node->rt().complete_external(other_cb);
  BOOST_REQUIRE(log.wait_for(other, event_type::completed, 1, patience));
  BOOST_TEST(log.count(id, event_type::completed) == 0u);
  BOOST_TEST(log.count(failed, event_type::exhausted) == 0u);
  BOOST_TEST(log.of(id).size() == 2u);     // started, waiting_for_callback
  BOOST_TEST(log.of(failed).size() == 2u); // started, waiting_for_callback
}

BOOST_AUTO_TEST_CASE(cli_payload_comes_from_a_file_or_stdin_past_what_an_argument_holds) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(db.config(4), log);
  auto [from_file, file_cb] = park(db, log);
  auto [from_stdin, stdin_cb] = park(db, log);
  // 200 KB: more than one argument may hold (128 KiB).
  auto path = "/tmp/aw_callback_payload_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out{path};
    out << "{\"blob\": \"" << std::string(200'000, 'x') << "\"}";
  }
  auto r = aw::test::run_binary("callback complete " + file_cb + " @" + path,
                                db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  r = aw::test::run_binary("callback complete " + stdin_cb + " - < " + path,
                           db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  for (auto id : {from_file, from_stdin}) {
    BOOST_TEST(s.text("SELECT state" + job_where(id)) == "completed");
    BOOST_TEST(s.scalar("SELECT length(callback_result->>'blob')" + job_where(id))
               == 200'000);
  }
  // A file that is not there is named.
  auto [other, other_cb] = park(db, log);
  r = aw::test::run_binary("callback complete " + other_cb + " @" + path + ".missing",
                           db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "PAYLOAD_JSON: cannot read '" + path + ".missing'"),
             r.err);
  BOOST_TEST(s.text("SELECT state" + job_where(other)) == "waiting_external");
  std::remove(path.c_str());
}

namespace {

/// Rescue runs every heartbeat: a short one, so expired callbacks are
/// found within a second of their timeout.
aw::runtime_config rescue_config(const aw::test::fresh_database& db) {
  auto cfg = db.config(4);
  cfg.worker.heartbeat_interval = 300ms;
  cfg.worker.reclaim_window = 3s;
  cfg.validate();
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_CASE(expired_callback_is_rescued_charged_an_attempt_and_rescheduled_with_a_rescued_event) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(rescue_config(db), log);
  aw::insert_options opts;
  opts.max_attempts = 3;
  // Parks for 1 s on its first run (nobody calls back), completes on the next.
  auto id = aw::test::enqueue_one(
    db, "act", script({step("wait", 1000), step("complete")}), opts);
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto callback_id = s.text("SELECT callback_id::text" + job_where(id));
  BOOST_REQUIRE(log.wait_for(id, event_type::rescued, 1, patience));
  auto e = log.of(id, event_type::rescued).at(0);
  BOOST_TEST((e.reason == aw::rescue_reason::expired_callback));
  BOOST_TEST(aw::test::field(e.job, "state") == "scheduled");
  BOOST_TEST(e.job.value("error_count", -1) == 1);
  BOOST_TEST_MESSAGE("message: " << e.message);
  BOOST_TEST(contains(e.message, "callback expired"));
  BOOST_TEST(contains(e.message, callback_id));
  BOOST_TEST(contains(aw::test::field(e.job, "last_error_message"), "callback expired"));
  // The expired callback can no longer be resolved.
  auto err = refused([&] { node->rt().complete_external(callback_id); });
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST((err->code() == aw::ec::callback_not_waiting));
  // It runs again after the backoff and completes, keeping the charge.
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto w = job_where(id);
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.scalar("SELECT error_count" + w) == 1);
  BOOST_TEST(s.scalar("SELECT attempt" + w) == 2);
  BOOST_TEST(contains(s.text("SELECT last_error_message" + w), "callback expired"));
  BOOST_TEST(log.count(id, event_type::rescued) == 1u);
}

BOOST_AUTO_TEST_CASE(expired_callback_on_the_last_attempt_is_dead_lettered_with_a_rescued_event) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto node = callback_node(rescue_config(db), log);
  aw::insert_options once;
  once.max_attempts = 1;
  auto [id, callback_id] = park(db, log, "1s", once);
  BOOST_REQUIRE(log.wait_for(id, event_type::rescued, 1, patience));
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(id)) == 0);
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(id)) == 1);
  BOOST_TEST(s.scalar("SELECT error_count" + dead_where(id)) == 1);
  auto message = s.text("SELECT last_error_message" + dead_where(id));
  BOOST_TEST_MESSAGE("message: " << message);
  BOOST_TEST(contains(message, "callback expired"));
  auto e = log.of(id, event_type::rescued).at(0);
  BOOST_TEST((e.reason == aw::rescue_reason::expired_callback));
  BOOST_TEST(e.job.value("original_job_id", int64_t{0}) == id);
  auto cb = callback_id;
  // A late resolution: the callback is known, its job is dead-lettered.
  auto err = refused([&] { node->rt().complete_external(cb); });
  BOOST_REQUIRE(err.has_value());
  BOOST_TEST((err->code() == aw::ec::callback_not_waiting));
  BOOST_TEST(contains(err->what(), "state dead_lettered"), err->what());
}

namespace {

/// A handler that registers its callback id while it runs, hands it to the
/// test, and waits for the test's word before it returns `then`.
struct hand_over {
  std::mutex mtx;
  std::condition_variable cv;
  std::string id;
  bool go = false;
  std::string error;

  aw::outcome run(const aw::job_context& ctx, aw::outcome then) {
    try {
      auto registered = ctx.register_callback(std::chrono::hours{1});
      // A second call is the same registration.
      if (ctx.register_callback(std::chrono::hours{2}) != registered
          || ctx.callback_id() != registered)
        throw std::runtime_error("a second registration changed the id");
      std::unique_lock<std::mutex> guard{mtx};
      id = registered;
      cv.notify_all();
      cv.wait_for(guard, patience, [&] { return go; });
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> guard{mtx};
      error = e.what();
      cv.notify_all();
      throw;
    }
    return then;
  }

  /// The id the running handler registered.
  std::string registered() {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait_for(guard, patience, [&] { return !id.empty() || !error.empty(); });
    BOOST_REQUIRE_MESSAGE(error.empty(), "registration failed: " << error);
    BOOST_REQUIRE(aw::test::is_uuid(id));
    return id;
  }

  void release() {
    std::lock_guard<std::mutex> guard{mtx};
    go = true;
    cv.notify_all();
  }
};

/// A node whose `hand_over` kind parks and `hand_over_done` completes, each
/// after registering its callback id through `h`.
std::unique_ptr<aw::test::worker_node>
hand_over_node(const aw::runtime_config& cfg, aw::test::event_log& log,
               hand_over& h,
               const std::function<void(aw::registry&)>& more = nullptr) {
  auto reg = std::make_shared<aw::registry>();
  if (more)
    more(*reg);
  reg->add_raw("hand_over", [&h](const nlohmann::json&, const aw::job_context& ctx) {
    return h.run(ctx, aw::outcome::wait_for_callback(std::chrono::seconds{1}));
  });
  reg->add_raw("hand_over_done", [&h](const nlohmann::json&, const aw::job_context& ctx) {
    return h.run(ctx, aw::outcome::completed());
  });
  reg->add_transactional<nlohmann::json>(
    "hand_over_tx",
    [](const nlohmann::json&, const aw::job_context& ctx, pqxx::work& tx) {
      auto id = ctx.register_callback(std::chrono::hours{1});
      tx.exec_params("INSERT INTO handed_over (job_id, callback_id) VALUES ($1, $2)",
                     ctx.id, id);
      return aw::outcome::wait_for_callback();
    });
  reg->on_event_kind("hand_over", log.hook());
  reg->on_event_kind("hand_over_done", log.hook());
  reg->on_event_kind("hand_over_tx", log.hook());
  return std::make_unique<aw::test::worker_node>(cfg, std::move(reg));
}

/// A database, a session on it, an event log and a node running the
/// hand_over kinds.
struct hand_over_fixture {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  hand_over h;
  std::unique_ptr<aw::test::worker_node> node = hand_over_node(db.config(4), log, h);
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_resolution_before_the_park_is_kept_and_applied_as_the_job_parks, hand_over_fixture) {
  auto id = aw::test::enqueue_one(db, "hand_over", nlohmann::json::object());
  auto callback_id = h.registered();
  auto w = job_where(id);
  // Registered while running: the row holds the id, the job still runs.
  BOOST_TEST(s.text("SELECT state" + w) == "running");
  BOOST_TEST(s.text("SELECT callback_id::text" + w) == callback_id);
  // The registration's timeout (1 h) stands, not the park's (1 s).
  BOOST_TEST(s.check("SELECT callback_timeout_at > now() + interval '50 minutes'" + w));

  auto kept = node->rt().complete_external(callback_id, {{"approved", true}});
  BOOST_TEST(kept.kept);
  BOOST_TEST(kept.row.value("id", int64_t{0}) == id);
  BOOST_TEST(s.text("SELECT state" + w) == "running");
  BOOST_TEST(log.count(id, event_type::completed) == 0u);
  // A second resolution before the park is refused and changes nothing.
  auto again = refused([&] { node->rt().fail_external(callback_id, "late"); });
  BOOST_REQUIRE(again.has_value());
  BOOST_TEST((again->code() == aw::ec::callback_not_waiting));
  BOOST_TEST(contains(again->what(), "still running"), again->what());

  h.release();
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  BOOST_TEST(log.count(id, event_type::waiting_for_callback) == 1u);
  auto parked = log.of(id, event_type::waiting_for_callback).at(0);
  BOOST_TEST(aw::test::field(parked.job, "callback_id") == callback_id);
  auto done = log.of(id, event_type::completed).at(0);
  BOOST_TEST(done.job.at("callback_result") == (nlohmann::json{{"approved", true}}));
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.check("SELECT callback_result = '{\"approved\": true}'::jsonb" + w));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE callback_early IS NOT NULL "
                      "OR callback_lease IS NOT NULL") == 0);
  // Resolved: a later resolution is refused as for any resolved callback.
  auto late = refused([&] { node->rt().complete_external(callback_id); });
  BOOST_REQUIRE(late.has_value());
  BOOST_TEST((late->code() == aw::ec::callback_not_waiting));
}

namespace {

/// A follow-up of a hand_over job's transition: the event and its trigger.
struct transition_note {
  static constexpr const char* kind = "transition_note";
  nlohmann::json body;
};

void to_json(nlohmann::json& j, const transition_note& n) {
  j = n.body;
}

} // namespace

BOOST_AUTO_TEST_CASE(an_early_resolution_and_its_follow_ups_commit_in_the_parks_transaction) {
  // The resolution kept early is applied as the job parks: the park and
  // the resolution's completion are one transaction, and so are the
  // follow-ups of both (one each), never one without the other.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  hand_over h;
  auto node = hand_over_node(db.config(4), log, h, [](aw::registry& reg) {
    reg.on_waiting_for_callback_enqueue<nlohmann::json>(
      "hand_over", [](const nlohmann::json&, const nlohmann::json& job) {
        return transition_note{{{"trigger", job.at("id")}, {"event", "parked"}}};
      });
    reg.on_completed_enqueue<nlohmann::json>(
      "hand_over", [](const nlohmann::json&, const nlohmann::json& job) {
        return transition_note{{{"trigger", job.at("id")},
                                {"event", "completed"},
                                {"result", job.at("callback_result")}}};
      });
  });
  auto id = aw::test::enqueue_one(db, "hand_over", nlohmann::json::object());
  auto callback_id = h.registered();
  auto kept = node->rt().complete_external(callback_id, {{"approved", true}});
  BOOST_TEST(kept.kept);
  // Kept, not applied: no follow-up yet.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE kind = 'transition_note'") == 0);
  h.release();
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto notes = "FROM jobs_in WHERE kind = 'transition_note' AND (args->>'trigger')::bigint = "
               + std::to_string(id);
  BOOST_TEST(s.scalar("SELECT count(*) " + notes + " AND args->>'event' = 'parked'") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) " + notes + " AND args->>'event' = 'completed'") == 1);
  BOOST_TEST(s.check("SELECT args->'result' = '{\"approved\": true}'::jsonb " + notes
                     + " AND args->>'event' = 'completed'"));
  // One transaction completed the job and inserted both follow-ups: its
  // now() is the job's finalized_at and their created_at. (Not xmin: a
  // claim may move the notes, whose kind nobody serves, off their lane.)
  BOOST_TEST(s.scalar("SELECT count(DISTINCT t) FROM (SELECT finalized_at AS t "
                      "FROM jobs_in WHERE id = " + std::to_string(id)
                      + " UNION ALL SELECT created_at " + notes + ") AS x")
             == 1);
  BOOST_TEST(s.text("SELECT state" + job_where(id)) == "completed");
}

BOOST_FIXTURE_TEST_CASE(a_registered_id_without_an_early_resolution_waits_and_resolves_as_usual, hand_over_fixture) {
  auto id = aw::test::enqueue_one(db, "hand_over", nlohmann::json::object());
  auto callback_id = h.registered();
  h.release();
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto w = job_where(id);
  BOOST_TEST(s.text("SELECT state" + w) == "waiting_external");
  BOOST_TEST(s.text("SELECT callback_id::text" + w) == callback_id);
  // The park's 1 s timeout did not replace the registration's hour.
  std::this_thread::sleep_for(std::chrono::milliseconds{1500});
  BOOST_TEST(s.text("SELECT state" + w) == "waiting_external");
  auto r = node->rt().retry_external(callback_id, {{"hint", 1}});
  BOOST_TEST(!r.kept);
  BOOST_REQUIRE(log.wait_for(id, event_type::retried, 1, patience));
}

BOOST_FIXTURE_TEST_CASE(an_id_whose_run_ended_without_parking_is_refused_and_a_stale_run_cannot_register, hand_over_fixture) {
  auto id = aw::test::enqueue_one(db, "hand_over_done", nlohmann::json::object());
  auto callback_id = h.registered();
  h.release();
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto gone = refused([&] { node->rt().complete_external(callback_id); });
  BOOST_REQUIRE(gone.has_value());
  BOOST_TEST((gone->code() == aw::ec::callback_not_waiting));
  BOOST_TEST(contains(gone->what(), "ended without parking"), gone->what());

  // A run that no longer holds its job registers nothing: a lease that is
  // not this job's, and one of another worker.
  auto other = aw::test::enqueue_one(db, "nobody_runs_this", nlohmann::json::object());
  auto conn = db.connect();
  pqxx::work tx{*conn};
  BOOST_TEST(!aw::storage::register_running_callback(tx, "no-such-worker", other,
                                                     1, std::chrono::hours{1}));
  BOOST_TEST(!aw::storage::register_running_callback(tx, "no-such-worker", other,
                                                     2, std::chrono::hours{1}));
  tx.commit();
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(other) + " AND callback_id IS NOT NULL") == 0);
}

BOOST_FIXTURE_TEST_CASE(a_transactional_handler_registers_through_its_own_transaction,
                        hand_over_fixture) {
  s.exec("CREATE TABLE handed_over (job_id bigint, callback_id text)");
  auto id = aw::test::enqueue_one(db, "hand_over_tx", nlohmann::json::object());
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  // The id was written with the park, in the same transaction (an outbox).
  auto handed = s.text("SELECT callback_id FROM handed_over WHERE job_id = "
                       + std::to_string(id));
  BOOST_TEST(s.text("SELECT callback_id::text" + job_where(id)) == handed);
  node->rt().complete_external(handed);
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
}

BOOST_AUTO_TEST_SUITE_END()
