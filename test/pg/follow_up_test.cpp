// Durable follow-up jobs (on_*_enqueue) against a real database: inserted
// in the transaction of the outcome (or callback resolution) that triggers
// them, for every outcome; rolled back with it when a follow-up fails; kept
// when the process dies before its hooks run; exactly once per committed
// outcome under racing workers.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pqxx/pqxx>

#include "actor_worker/messages/error.hpp"
#include "log_capture.hpp"
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

/// A follow-up job of kind `note`; its args are `body`.
struct note {
  static constexpr const char* kind = "note";
  nlohmann::json body;
};

void to_json(nlohmann::json& j, const note& n) {
  j = n.body;
}

/// The trigger's id in a committed row (a dead letter row names it
/// original_job_id).
int64_t trigger_of(const nlohmann::json& job) {
  return job.value(job.contains("original_job_id") ? "original_job_id" : "id",
                   int64_t{0});
}

/// Args that hold an order number: `{"order": 7}`.
struct order_args {
  int64_t order = 0;
};

void from_json(const nlohmann::json& j, order_args& a) {
  a.order = j.at("order").get<int64_t>();
}

/// The scripted handler for `kind`.
void add_scripted(aw::registry& reg, const std::string& kind) {
  reg.add_raw(kind, [](const nlohmann::json& args, const aw::job_context& ctx) {
    return aw::test::scripted(args, ctx);
  });
}

/// " FROM jobs_live WHERE kind = 'note' AND (args->>'trigger')::bigint = N"
std::string notes_of(int64_t trigger) {
  return " FROM jobs_live WHERE kind = 'note' AND (args->>'trigger')::bigint = "
         + std::to_string(trigger);
}

} // namespace

BOOST_AUTO_TEST_SUITE(follow_up_test)

BOOST_AUTO_TEST_CASE(completed_follow_up_exists_exactly_when_its_trigger_is_completed) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "signup");
  // Welcome mails go to a queue this node does not serve: they stay put.
  reg->on_completed_enqueue<nlohmann::json>(
    "signup", [](const nlohmann::json& args, const nlohmann::json& job) {
      aw::enqueue_request r;
      r.kind = "welcome";
      r.args = {{"user", args.at("user")},
                {"signup_job_id", job.at("id")},
                {"trigger_state", job.at("state")}};
      r.options.queue = "mail";
      return r;
    });
  const int n = 300;
  std::vector<aw::enqueue_request> requests;
  for (int i = 0; i < n; ++i) {
    // Two in three complete; the others are cancelled or fail for good.
    auto last = i % 3 != 2 ? step("complete")
                : i % 2 == 0 ? step("cancel", 0, "not needed")
                             : step("terminal", 0, "invalid email");
    last["sleep_ms"] = 2;
    auto args = script({last});
    args["user"] = i;
    requests.push_back({"signup", args, {}});
  }
  // A sampler checks the invariant in single-statement snapshots while
  // the jobs complete.
  std::atomic<bool> stop{false};
  std::atomic<int> samples{0};
  std::atomic<int> mismatches{0};
  std::thread sampler_thread{[&] {
    aw::test::db_session probe{db.url};
    while (!stop) {
      auto r = probe.query(
        "SELECT (SELECT count(*) FROM jobs_live WHERE kind = 'signup' "
        "        AND state = 'completed'), "
        "       (SELECT count(*) FROM jobs_live WHERE kind = 'welcome')");
      if (r[0][0].as<int64_t>() != r[0][1].as<int64_t>())
        ++mismatches;
      ++samples;
    }
  }};
  aw::test::thread_joiner sampler{stop, sampler_thread};
  {
    aw::test::worker_node node{db.config(8), std::move(reg)};
    auto ids = aw::test::enqueue_all(db, requests);
    auto done = aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'signup' "
                        "AND state IN ('completed', 'cancelled')")
                   + s.scalar("SELECT count(*) FROM dead_letter_jobs")
               == n;
      },
      patience);
    stop = true;
    sampler_thread.join();
    BOOST_REQUIRE(done);
  }
  BOOST_TEST_MESSAGE(samples.load() << " samples");
  BOOST_TEST(samples.load() > 0);
  BOOST_TEST(mismatches.load() == 0);
  auto completed = s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'signup' "
                            "AND state = 'completed'");
  BOOST_TEST(completed == 200);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome'") == completed);
  // One welcome per completed signup, none for the others; each built from
  // the post-completion row.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live AS t WHERE kind = 'signup' "
                      "AND state = 'completed' AND (SELECT count(*) FROM jobs_live AS w "
                      "WHERE w.kind = 'welcome' AND (w.args->>'signup_job_id')::bigint = t.id "
                      "AND w.args->'user' = t.args->'user') <> 1")
             == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live AS w WHERE kind = 'welcome' "
                      "AND NOT EXISTS (SELECT 1 FROM jobs_live AS t WHERE "
                      "t.id = (w.args->>'signup_job_id')::bigint AND t.state = 'completed')")
             == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome' "
                      "AND (args->>'trigger_state' <> 'completed' OR queue <> 'mail' "
                      "OR state <> 'available')")
             == 0);
}

BOOST_AUTO_TEST_CASE(each_on_enqueue_variant_inserts_its_follow_up_with_the_callable_arguments) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto reg = std::make_shared<aw::registry>();
  for (auto* kind : {"fu_cancel", "fu_retry", "fu_exhaust", "fu_wait", "fu_rescue"})
    add_scripted(*reg, kind);
  reg->add_raw("note", [](const nlohmann::json&, const aw::job_context&) {});
  using json = nlohmann::json;
  reg->on_cancelled_enqueue<json>(
    "fu_cancel", [](const json&, const json& job, const std::string& reason) {
      return note{{{"trigger", trigger_of(job)}, {"event", "cancelled"},
                   {"reason", reason}, {"state", job.at("state")}}};
    });
  reg->on_retried_enqueue<json>(
    "fu_retry", [](const json&, const json& job, const std::string& error,
                   int attempt, const std::string& next_run_at) {
      return note{{{"trigger", trigger_of(job)}, {"event", "retried"},
                   {"error", error}, {"attempt", attempt},
                   {"next_run_at", next_run_at}, {"state", job.at("state")}}};
    });
  reg->on_exhausted_enqueue<json>(
    "fu_exhaust",
    [](const json& args, const json& job, const std::string& error, int attempt) {
      return note{{{"trigger", trigger_of(job)}, {"event", "exhausted"},
                   {"error", error}, {"attempt", attempt},
                   {"tag", args.at("tag")}}};
    });
  reg->on_waiting_for_callback_enqueue<json>(
    "fu_wait", [](const json&, const json& job) {
      return note{{{"trigger", trigger_of(job)}, {"event", "waiting_for_callback"},
                   {"callback_id", job.at("callback_id")},
                   {"state", job.at("state")}}};
    });
  reg->on_rescued_enqueue<json>(
    "fu_rescue", [](const json&, const json& job, aw::rescue_reason reason) {
      return note{{{"trigger", trigger_of(job)}, {"event", "rescued"},
                   {"reason", aw::to_string(reason)},
                   {"error_count", job.at("error_count")}}};
    });
  auto cfg = db.config(8);
  // Rescue (of the expired callback) runs every heartbeat.
  cfg.worker.heartbeat_interval = 300ms;
  cfg.worker.reclaim_window = 3s;
  cfg.validate();
  aw::test::worker_node node{cfg, std::move(reg)};
  aw::insert_options three;
  three.max_attempts = 3;
  auto cancel_id = aw::test::enqueue_one(db, "fu_cancel",
                                         script({step("cancel", 0, "duplicate order")}));
  auto retry_id = aw::test::enqueue_one(db, "fu_retry",
                                        script({step("retry_after", 60000, "rate limited")}));
  auto exhaust_args = script({step("terminal", 0, "account closed")});
  exhaust_args["tag"] = "x1";
  auto exhaust_id = aw::test::enqueue_one(db, "fu_exhaust", exhaust_args);
  auto wait_id = aw::test::enqueue_one(db, "fu_wait", script({step("wait", 3'600'000)}));
  // Parks for 1 s with nobody calling back, completes when run again.
  auto rescue_id = aw::test::enqueue_one(
    db, "fu_rescue", script({step("wait", 1000), step("complete")}), three);

  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") >= 5
             && s.text("SELECT state" + job_where(rescue_id)) == "completed";
    },
    patience));
  for (auto id : {cancel_id, retry_id, exhaust_id, wait_id, rescue_id})
    BOOST_TEST_CONTEXT("trigger " << id) {
      BOOST_TEST(s.scalar("SELECT count(*)" + notes_of(id)) == 1);
    }
  auto body = [&](int64_t id) {
    return nlohmann::json::parse(s.text("SELECT args::text" + notes_of(id)));
  };
  auto c = body(cancel_id);
  BOOST_TEST(c.at("event") == "cancelled");
  BOOST_TEST(c.at("reason") == "duplicate order");
  BOOST_TEST(c.at("state") == "cancelled");

  auto r = body(retry_id);
  BOOST_TEST(r.at("error") == "rate limited");
  BOOST_TEST(r.at("attempt") == 1);
  BOOST_TEST(r.at("state") == "scheduled");
  // next_run_at is the rescheduled run_at of the committed row.
  BOOST_TEST(s.check("SELECT run_at = '" + r.at("next_run_at").get<std::string>()
                     + "'::timestamptz" + job_where(retry_id)));

  auto x = body(exhaust_id);
  BOOST_TEST(x.at("error") == "account closed");
  BOOST_TEST(x.at("attempt") == 1);
  BOOST_TEST(x.at("tag") == "x1"); // the trigger's args, parsed
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(exhaust_id)) == 1);

  auto w = body(wait_id);
  BOOST_TEST(w.at("state") == "waiting_external");
  // The durable hand-over of the callback id.
  BOOST_TEST(w.at("callback_id").get<std::string>()
             == s.text("SELECT callback_id::text" + job_where(wait_id)));

  auto q = body(rescue_id);
  BOOST_TEST(q.at("reason") == "expired callback");
  BOOST_TEST(q.at("error_count") == 1);
  // Follow-ups are ordinary jobs: these ran.
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note' "
                      "AND state = 'completed'")
             == 5;
    },
    patience));
}

BOOST_AUTO_TEST_CASE(the_attempt_of_retried_and_exhausted_counts_failures_only_after_a_snooze_and_after_a_release) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto reg = std::make_shared<aw::registry>();
  using json = nlohmann::json;
  for (auto* kind : {"fu_snoozed", "fu_released"}) {
    add_scripted(*reg, kind);
    reg->on_event_kind(kind, log.hook());
    reg->on_retried_enqueue<json>(
      kind, [](const json&, const json& job, const std::string&, int attempt,
               const std::string&) {
        return note{{{"trigger", trigger_of(job)}, {"event", "retried"},
                     {"attempt", attempt}, {"starts", job.at("attempt")}}};
      });
    reg->on_exhausted_enqueue<json>(
      kind, [](const json&, const json& job, const std::string&, int attempt) {
        return note{{{"trigger", trigger_of(job)}, {"event", "exhausted"},
                     {"attempt", attempt}, {"starts", job.at("attempt")}}};
      });
  }
  reg->add_raw("note", [](const nlohmann::json&, const aw::job_context&) {});
  auto cfg = db.config(4);
  cfg.worker.shutdown_drain = 200ms;
  cfg.validate();
  // Run 1 snoozes (or outlasts the shutdown drain and is released), run 2
  // fails, run 3 fails for good.
  auto snoozed = aw::test::enqueue_one(
    db, "fu_snoozed",
    script({step("snooze", 0), step("throw", 0, "boom"),
            step("terminal", 0, "dead")}));
  auto slow = step("complete");
  slow["sleep_ms"] = 2000;
  int64_t released = 0;
  {
    aw::test::worker_node first{cfg, reg};
    released = aw::test::enqueue_one(
      db, "fu_released",
      script({slow, step("throw", 0, "boom"), step("terminal", 0, "dead")}));
    BOOST_REQUIRE(log.wait_for(released, event_type::started, 1, patience));
  } // stops: the drain budget runs out, the started run is released
  BOOST_TEST(s.text("SELECT state" + job_where(released)) == "available");
  BOOST_TEST(s.scalar("SELECT attempt" + job_where(released)) == 1);
  aw::test::worker_node second{cfg, reg};
  for (auto id : {snoozed, released})
    BOOST_TEST_CONTEXT("trigger " << id) {
      BOOST_REQUIRE(log.wait_for(id, event_type::exhausted, 1, patience));
      auto retried = log.of(id, event_type::retried);
      BOOST_REQUIRE_EQUAL(retried.size(), 1u);
      // The attempt that failed is the first failure although it was the
      // second start.
      BOOST_TEST(retried[0].attempt == 1);
      BOOST_TEST(retried[0].job.value("attempt", 0) == 2);
      BOOST_TEST(log.of(id, event_type::exhausted).at(0).attempt == 2);
      BOOST_REQUIRE(aw::test::wait_until(
        [&] { return s.scalar("SELECT count(*)" + notes_of(id)) == 2; },
        patience));
      BOOST_TEST(s.scalar("SELECT (args->>'attempt')::int" + notes_of(id)
                          + " AND args->>'event' = 'retried'")
                 == 1);
      BOOST_TEST(s.scalar("SELECT (args->>'starts')::int" + notes_of(id)
                          + " AND args->>'event' = 'retried'")
                 == 2);
      BOOST_TEST(s.scalar("SELECT (args->>'attempt')::int" + notes_of(id)
                          + " AND args->>'event' = 'exhausted'")
                 == 2);
      // started events number the run as the limit counts it as well: the
      // first two starts are both attempt 1.
      auto started = log.of(id, event_type::started);
      BOOST_REQUIRE_EQUAL(started.size(), 3u);
      BOOST_TEST(started[0].attempt == 1);
      BOOST_TEST(started[1].attempt == 1);
      BOOST_TEST(started[2].attempt == 2);
    }
}

BOOST_AUTO_TEST_CASE(follow_up_returning_an_enqueue_request_lands_its_options) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "signup");
  reg->on_completed_enqueue<nlohmann::json>(
    "signup", [](const nlohmann::json& args, const nlohmann::json& job)
                -> std::optional<aw::enqueue_request> {
      if (args.value("opted_out", false))
        return std::nullopt; // a conditional follow-up: none this time
      aw::enqueue_request r;
      r.kind = "welcome";
      r.args = {{"user", args.at("user")}};
      r.options.queue = "mail";
      r.options.priority = 3;
      r.options.max_attempts = 7;
      r.options.metadata = {{"source", "signup"}, {"trigger", job.at("id")}};
      r.options.tags = {"welcome", "eu"};
      r.options.deadline = 30s;
      r.options.ordering_key = "user-" + args.at("user").dump();
      r.options.delay = 1h;
      return r;
    });
  aw::test::worker_node node{db.config(4), std::move(reg)};
  auto id = aw::test::enqueue_one(db, "signup", {{"user", 7}});
  auto opted_out = aw::test::enqueue_one(db, "signup",
                                         {{"user", 8}, {"opted_out", true}});
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'signup' "
                      "AND state = 'completed'")
             == 2;
    },
    patience));
  BOOST_REQUIRE_EQUAL(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome'"), 1);
  auto f = std::string{" FROM jobs_live WHERE kind = 'welcome'"};
  BOOST_TEST(s.text("SELECT queue" + f) == "mail");
  BOOST_TEST(s.scalar("SELECT priority" + f) == 3);
  BOOST_TEST(s.scalar("SELECT max_attempts" + f) == 7);
  BOOST_TEST(s.check("SELECT metadata = jsonb_build_object('source', 'signup', "
                     "'trigger', "
                     + std::to_string(id) + ")" + f));
  BOOST_TEST(s.check("SELECT tags = ARRAY['welcome', 'eu']::text[]" + f));
  BOOST_TEST(s.scalar("SELECT deadline_ms" + f) == 30000);
  BOOST_TEST(s.text("SELECT ordering_key" + f) == "user-7");
  BOOST_TEST(s.check("SELECT args = '{\"user\": 7}'::jsonb" + f));
  BOOST_TEST(s.check("SELECT state = 'scheduled' AND run_at > now() + interval '50 minutes'"
                     + f));
  BOOST_TEST(s.text("SELECT state" + job_where(opted_out)) == "completed");
}

BOOST_AUTO_TEST_CASE(throwing_follow_up_rolls_the_completion_back_and_records_a_retryable_failure) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  // While broken, user 13's follow-up cannot be built and user 14's throws
  // not even a std::exception. (A flag, not "the first call": a batch that
  // fails is recorded again outcome by outcome, calling callables again.)
  std::atomic<bool> broken{true};
  std::atomic<int> throws{0};
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "signup");
  reg->on_event_kind("signup", log.hook());
  reg->on_completed_enqueue<nlohmann::json>(
    "signup", [&broken, &throws](const nlohmann::json& args,
                                 const nlohmann::json& job) {
      if (broken && args.at("user") == 13) {
        ++throws;
        throw std::runtime_error("welcome template missing");
      }
      if (broken && args.at("user") == 14) {
        ++throws;
        throw 42;
      }
      aw::enqueue_request r;
      r.kind = "welcome";
      r.args = {{"trigger", job.at("id")}};
      r.options.queue = "mail";
      return r;
    });
  std::vector<aw::enqueue_request> requests;
  for (int user = 1; user <= 20; ++user)
    requests.push_back({"signup", {{"user", user}}, {}});
  aw::test::worker_node node{db.config(8), std::move(reg)};
  auto ids = aw::test::enqueue_all(db, requests);
  auto bad = ids.at(12); // user 13
  auto odd = ids.at(13); // user 14
  BOOST_REQUIRE(log.wait_for(bad, event_type::retried, 1, patience));
  BOOST_REQUIRE(log.wait_for(odd, event_type::retried, 1, patience));
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'signup' "
                      "AND state = 'completed'")
             == 18;
    },
    patience));
  auto welcomes_of = [&](int64_t id) {
    return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome' "
                    "AND (args->>'trigger')::bigint = "
                    + std::to_string(id));
  };
  // The committed row of the first failed recording: the completion was
  // rolled back and the run recorded as a retryable failure naming the
  // follow-up and its error.
  auto first = log.of(bad, event_type::retried).at(0).job;
  BOOST_TEST(aw::test::field(first, "state") == "scheduled");
  BOOST_TEST(first.value("error_count", -1) == 1);
  BOOST_TEST(first.value("attempt", -1) == 1);
  auto message = aw::test::field(first, "last_error_message");
  BOOST_TEST_MESSAGE("message: " << message);
  BOOST_TEST(contains(message, "recording the outcome (completed) failed"));
  BOOST_TEST(contains(message, "a follow-up of job kind 'signup' (on completed of job "
                                 + std::to_string(bad) + ") failed"));
  BOOST_TEST(contains(message, "welcome template missing"));
  auto odd_first = log.of(odd, event_type::retried).at(0).job;
  auto odd_message = aw::test::field(odd_first, "last_error_message");
  BOOST_TEST_MESSAGE("message: " << odd_message);
  BOOST_TEST(aw::test::field(odd_first, "state") == "scheduled");
  BOOST_TEST(contains(odd_message, "a follow-up of job kind 'signup' (on completed of job "
                                     + std::to_string(odd) + ") failed"));
  BOOST_TEST(contains(odd_message, "non-standard exception"));
  // While the follow-up stays broken: never completed, never a follow-up
  // (each retry fails the same way), and the node lives on.
  for (auto id : {bad, odd})
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_TEST(s.text("SELECT state" + job_where(id)) != "completed");
      BOOST_TEST(s.scalar("SELECT error_count" + job_where(id)) >= 1);
      BOOST_TEST(welcomes_of(id) == 0);
      BOOST_TEST(log.count(id, event_type::completed) == 0u);
    }
  BOOST_TEST(!node.rt().wait_for(0ms).has_value());
  // The other 18, in the same batches, were recorded with their follow-ups.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome'") == 18);
  // Repaired, both run again (skipping the backoff) and complete, each
  // with exactly one follow-up.
  broken = false;
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      s.exec("UPDATE jobs_in SET run_at = now() WHERE state = 'scheduled'");
      return log.count(bad, event_type::completed) == 1
             && log.count(odd, event_type::completed) == 1;
    },
    patience));
  for (auto id : {bad, odd})
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_TEST(s.text("SELECT state" + job_where(id)) == "completed");
      BOOST_TEST(s.scalar("SELECT attempt" + job_where(id)) >= 2);
      BOOST_TEST(welcomes_of(id) == 1);
    }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome'") == 20);
  BOOST_TEST(throws.load() >= 2);
}

BOOST_AUTO_TEST_CASE(callback_resolution_with_a_throwing_follow_up_is_refused_and_leaves_the_job_waiting) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  std::atomic<bool> broken{true};
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "approval");
  reg->add_raw("sentinel", [](const nlohmann::json&, const aw::job_context&) {});
  reg->on_event_kind("approval", log.hook());
  reg->on_event_kind("sentinel", log.hook());
  auto follow_up = [&broken](const std::string& event) {
    return [&broken, event](const nlohmann::json&, const nlohmann::json& job) {
      if (broken)
        throw std::runtime_error("audit log unavailable");
      return note{{{"trigger", trigger_of(job)}, {"event", event}}};
    };
  };
  reg->on_completed_enqueue<nlohmann::json>("approval", follow_up("completed"));
  reg->on_exhausted_enqueue<nlohmann::json>(
    "approval", [f = follow_up("exhausted")](const nlohmann::json& a,
                                             const nlohmann::json& job,
                                             const std::string&, int) {
      return f(a, job);
    });
  reg->on_retried_enqueue<nlohmann::json>(
    "approval", [f = follow_up("retried")](const nlohmann::json& a,
                                           const nlohmann::json& job,
                                           const std::string&, int,
                                           const std::string&) {
      return f(a, job);
    });
  aw::test::worker_node node{db.config(4), std::move(reg)};
  auto& rt = node.rt();
  auto id = aw::test::enqueue_one(db, "approval", script({step("wait", 3'600'000)}));
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto w = job_where(id);
  auto callback_id = s.text("SELECT callback_id::text" + w);
  auto before = s.text("SELECT to_jsonb(j)::text FROM jobs_live AS j WHERE id = "
                       + std::to_string(id));
  std::vector<std::pair<std::string, std::function<void()>>> attempts = {
    {"complete", [&] { rt.complete_external(callback_id, {{"ok", true}}); }},
    {"fail", [&] { rt.fail_external(callback_id, "denied"); }},
    {"retry", [&] { rt.retry_external(callback_id); }},
    {"resolve", [&] { rt.resolve_callback(callback_id, {{"ok", 1}}, "complete"); }},
  };
  for (auto& [name, fn] : attempts) {
    BOOST_TEST_CONTEXT(name) {
      std::optional<aw::storage::callback_error> err;
      try {
        fn();
      } catch (const aw::storage::callback_error& e) {
        err = e;
      }
      BOOST_REQUIRE(err.has_value());
      BOOST_TEST((err->code() == aw::ec::follow_up_failed));
      BOOST_TEST_MESSAGE(err->what());
      BOOST_TEST(contains(err->what(), "rolled back"));
      BOOST_TEST(contains(err->what(), "audit log unavailable"));
      // Still waiting, unchanged; no follow-up.
      BOOST_TEST(s.text("SELECT to_jsonb(j)::text FROM jobs_live AS j WHERE id = "
                        + std::to_string(id))
                 == before);
      BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") == 0);
      BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
    }
  }
  // No event was dispatched for the refused resolutions.
  auto sentinel = aw::test::enqueue_one(db, "sentinel");
  BOOST_REQUIRE(log.wait_for(sentinel, event_type::completed, 1, patience));
  BOOST_TEST(log.of(id).size() == 2u); // started, waiting_for_callback
  // The sender retries once the follow-up works: both commit.
  broken = false;
  rt.complete_external(callback_id, {{"ok", true}});
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.scalar("SELECT count(*)" + notes_of(id)) == 1);
  BOOST_TEST(s.text("SELECT args->>'event'" + notes_of(id)) == "completed");
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
}

BOOST_AUTO_TEST_CASE(an_exhausted_job_reaches_the_dead_letter_queue_when_its_follow_up_fails) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::log_capture captured;
  aw::test::event_log log;
  std::atomic<int> calls{0};
  auto reg = std::make_shared<aw::registry>();
  // The handler and the follow-up are both typed: args that do not parse
  // fail the job terminally, and make the follow-up throw.
  reg->add<order_args>("charge", [](const order_args&, const aw::job_context&) {});
  reg->on_event_kind("charge", log.hook());
  reg->on_exhausted_enqueue<order_args>(
    "charge", [&calls](const order_args& a, const nlohmann::json& job,
                       const std::string&, int) {
      ++calls;
      return note{{{"trigger", trigger_of(job)}, {"order", a.order}}};
    });
  reg->add_raw("note", [](const nlohmann::json&, const aw::job_context&) {});
  aw::test::worker_node node{db.config(4), std::move(reg)};
  aw::insert_options three;
  three.max_attempts = 3;
  auto id = aw::test::enqueue_one(db, "charge", {{"order", "not a number"}},
                                  three);
  // Dead-lettered by its first run, whatever the follow-up did: never
  // retried, never left running for a rescue.
  BOOST_REQUIRE(log.wait_for(id, event_type::exhausted, 1, 20s));
  BOOST_TEST(log.count(id, event_type::retried) == 0u);
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(id)) == 1);
  BOOST_TEST(s.scalar("SELECT count(*)" + job_where(id) + " AND state = 'running'") == 0);
  BOOST_TEST(contains(s.text("SELECT last_error_message" + dead_where(id)),
                      "malformed args for job kind 'charge'"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") == 0);
  BOOST_TEST(calls.load() == 0); // the args never parsed
  // The follow-up's failure is logged, saying which follow-up and why.
  BOOST_TEST(aw::test::wait_until(
    [&] {
      return captured.has("a follow-up of job kind 'charge' (on exhausted of job "
                          + std::to_string(id) + ") failed");
    },
    patience));
  BOOST_TEST(!node.rt().wait_for(0ms).has_value());
}

BOOST_AUTO_TEST_CASE(a_failed_job_is_retried_when_its_retried_follow_up_fails) {
  // A failure that is not the last: its on_retried_enqueue follow-up
  // throws. The retry still commits (the follow-up is tried after it, and
  // its failure logged), instead of the job staying running until a rescue.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::log_capture captured;
  aw::test::event_log log;
  std::atomic<int> calls{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("flaky", [](const nlohmann::json&, const aw::job_context& ctx) {
    if (ctx.attempt == 1)
      throw std::runtime_error("gateway timeout");
  });
  reg->on_event_kind("flaky", log.hook());
  reg->on_retried_enqueue<nlohmann::json>(
    "flaky", [&calls](const nlohmann::json&, const nlohmann::json&,
                      const std::string&, int, const std::string&) -> note {
      ++calls;
      throw std::runtime_error("ledger service down");
    });
  aw::test::worker_node node{db.config(4), std::move(reg)};
  aw::insert_options three;
  three.max_attempts = 3;
  auto id = aw::test::enqueue_one(db, "flaky", nlohmann::json::object(), three);
  BOOST_REQUIRE(log.wait_for(id, event_type::retried, 1, 20s));
  BOOST_TEST(calls.load() >= 1);
  BOOST_TEST(s.scalar("SELECT error_count" + job_where(id)) == 1);
  BOOST_TEST(contains(s.text("SELECT last_error_message" + job_where(id)),
                      "gateway timeout"));
  BOOST_TEST(s.text("SELECT state" + job_where(id)) != "running");
  BOOST_TEST(aw::test::wait_until(
    [&] {
      return captured.has("a follow-up of job kind 'flaky' (on retried of job "
                          + std::to_string(id) + ") failed");
    },
    patience));
  // It runs again after its backoff and completes.
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id = " + std::to_string(id));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  BOOST_TEST(s.scalar("SELECT attempt" + job_where(id)) == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") == 0);
  BOOST_TEST(!node.rt().wait_for(0ms).has_value());
}

BOOST_AUTO_TEST_CASE(failing_rescue_follow_up_leaves_the_rescue_applied) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  std::atomic<int> calls{0};
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "act");
  reg->on_event_kind("act", log.hook());
  reg->on_rescued_enqueue<nlohmann::json>(
    "act", [&calls](const nlohmann::json&, const nlohmann::json&,
                    aw::rescue_reason) -> note {
      ++calls;
      throw std::runtime_error("pager service down");
    });
  auto cfg = db.config(4);
  cfg.worker.heartbeat_interval = 300ms;
  cfg.worker.reclaim_window = 3s;
  cfg.validate();
  aw::test::worker_node node{cfg, std::move(reg)};
  aw::insert_options three;
  three.max_attempts = 3;
  // Parks for 1 s with nobody calling back, completes when run again.
  auto id = aw::test::enqueue_one(
    db, "act", script({step("wait", 1000), step("complete")}), three);
  // Rescue is best effort for follow-ups: the rescue stands and is dispatched.
  BOOST_REQUIRE(log.wait_for(id, event_type::rescued, 1, patience));
  BOOST_TEST(calls.load() >= 1);
  BOOST_TEST(s.scalar("SELECT error_count" + job_where(id)) == 1);
  BOOST_TEST(contains(s.text("SELECT last_error_message" + job_where(id)),
                      "callback expired"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") == 0);
  // The node lives on and the job runs again.
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  BOOST_TEST(s.text("SELECT state" + job_where(id)) == "completed");
  BOOST_TEST(!node.rt().wait_for(0ms).has_value());
}

namespace {

/// A child process with stdout/stderr in a file; SIGKILLed if still running
/// at scope exit.
class child_process {
public:
  child_process(std::vector<std::string> argv_s, const std::string& log_path) {
    std::vector<char*> argv;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    BOOST_REQUIRE(fd >= 0);
    pid_ = ::fork();
    BOOST_REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fd);
  }

  ~child_process() {
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  /// Sends SIGKILL and reaps; returns the wait status.
  int kill_9() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
  }

  bool running() {
    if (reaped_)
      return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return false;
    }
    return true;
  }

private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

std::string crash_helper_path() {
  auto env = std::getenv("AW_CRASH_HELPER");
  if (env == nullptr || *env == '\0')
    BOOST_FAIL("AW_CRASH_HELPER is not set: run the database tests through ctest");
  return env;
}

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

} // namespace

BOOST_AUTO_TEST_CASE(process_killed_between_commit_and_hook_dispatch_keeps_the_follow_up_and_loses_the_hook) {
  namespace fs = std::filesystem;
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  struct temp_dir {
    fs::path path;
    ~temp_dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } tmp{fs::temp_directory_path()
        / ("aw_crash_" + std::to_string(::getpid()) + "_" + db.name)};
  const auto& dir = tmp.path;
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto marker = [&](const std::string& name) { return fs::exists(dir / name); };
  auto log_path = (dir / "helper.log").string();
  {
    child_process helper{{crash_helper_path(), db.url, dir.string()}, log_path};
    BOOST_REQUIRE_MESSAGE(
      aw::test::wait_until([&] { return marker("started") || !helper.running(); },
                           patience)
        && helper.running(),
      "the helper did not start: " << slurp(log_path));
    // Control: in this process a trigger's hooks do run and leave their mark.
    auto control = aw::test::enqueue_one(db, "trigger");
    BOOST_REQUIRE_MESSAGE(
      aw::test::wait_until(
        [&] { return marker("hook_completed_" + std::to_string(control)); },
        patience),
      "the control trigger's hook never ran: " << slurp(log_path));
    // Job B's hook blocks the helper's hook dispatcher for good ...
    aw::test::enqueue_one(db, "blocker");
    BOOST_REQUIRE_MESSAGE(
      aw::test::wait_until([&] { return marker("hooks_blocked"); }, patience),
      "the blocker's hook never ran: " << slurp(log_path));
    // ... so job A's transition commits (with its follow-up) but its hooks
    // are never dispatched before the process dies.
    auto a = aw::test::enqueue_one(db, "trigger");
    BOOST_REQUIRE_MESSAGE(
      aw::test::wait_until(
        [&] {
          return s.text("SELECT state" + job_where(a)) == "completed"
                 && s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'after' "
                             "AND (args->>'trigger_id')::bigint = "
                             + std::to_string(a))
                      > 0;
        },
        patience),
      "the trigger and its follow-up never committed: " << slurp(log_path));
    auto status = helper.kill_9();
    BOOST_TEST(WIFSIGNALED(status));
    BOOST_TEST(WTERMSIG(status) == SIGKILL);
    // Durable: the completion and exactly one follow-up, committed together.
    BOOST_TEST(s.text("SELECT state" + job_where(a)) == "completed");
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'after' "
                        "AND (args->>'trigger_id')::bigint = "
                        + std::to_string(a))
               == 1);
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'after'") == 2);
    // Lost: no hook of A ever ran (neither its started nor its completed).
    auto suffix = "_" + std::to_string(a);
    std::vector<std::string> hook_files;
    for (auto& entry : fs::directory_iterator(dir)) {
      auto name = entry.path().filename().string();
      if (name.rfind("hook_", 0) == 0 && name.size() > suffix.size()
          && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        hook_files.push_back(name);
    }
    BOOST_TEST(hook_files.empty(), "hook side effects of job " << a << " found: "
                                                              << hook_files.size());
    BOOST_TEST(!marker("hook_completed_" + std::to_string(a)));
    BOOST_TEST(marker("hook_completed_" + std::to_string(control)));
  }
}

BOOST_AUTO_TEST_CASE(four_racing_workers_enqueue_exactly_one_follow_up_per_committed_outcome) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto make_registry = [] {
    auto reg = std::make_shared<aw::registry>();
    add_scripted(*reg, "trigger");
    auto note_for = [](const nlohmann::json& job, const std::string& event) {
      aw::enqueue_request r;
      r.kind = "note";
      r.args = {{"trigger", trigger_of(job)},
                {"event", event},
                {"attempt", job.at("attempt")}};
      r.options.queue = "sink"; // nobody serves it: the rows stay
      return r;
    };
    reg->on_retried_enqueue<nlohmann::json>(
      "trigger", [note_for](const nlohmann::json&, const nlohmann::json& job,
                            const std::string&, int, const std::string&) {
        return note_for(job, "retried");
      });
    reg->on_completed_enqueue<nlohmann::json>(
      "trigger", [note_for](const nlohmann::json&, const nlohmann::json& job) {
        return note_for(job, "completed");
      });
    return reg;
  };
  const int n = 2000;
  // Each trigger asks to be retried once, then completes: two committed
  // outcomes, two follow-ups.
  auto args = script({step("retry_after", 20), step("complete")});
  std::vector<aw::enqueue_request> requests(n, aw::enqueue_request{"trigger", args, {}});
  {
    std::vector<std::unique_ptr<aw::test::worker_node>> nodes;
    for (int i = 0; i < 4; ++i) {
      auto cfg = db.config(8);
      cfg.worker.node = "node" + std::to_string(i);
      nodes.push_back(std::make_unique<aw::test::worker_node>(cfg, make_registry()));
    }
    aw::test::enqueue_all(db, requests);
    auto done = aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'trigger' "
                        "AND state = 'completed'")
               == n;
      },
      std::chrono::seconds{120});
    BOOST_REQUIRE_MESSAGE(done, s.scalar("SELECT count(*) FROM jobs_live WHERE kind = "
                                         "'trigger' AND state = 'completed'")
                                  << " of " << n << " completed");
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'trigger' "
                      "AND attempt = 2 AND error_count = 1")
             == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") == 2 * n);
  // Exactly one follow-up per (trigger, outcome).
  BOOST_TEST(s.scalar("SELECT count(*) FROM (SELECT args->>'trigger', args->>'event' "
                      "FROM jobs_live WHERE kind = 'note' GROUP BY 1, 2 "
                      "HAVING count(*) <> 1) AS dup")
             == 0);
  BOOST_TEST(s.scalar("SELECT count(DISTINCT args->>'trigger') FROM jobs_live "
                      "WHERE kind = 'note' AND args->>'event' = 'completed'")
             == n);
  BOOST_TEST(s.scalar("SELECT count(DISTINCT args->>'trigger') FROM jobs_live "
                      "WHERE kind = 'note' AND args->>'event' = 'retried'")
             == n);
  // Each built from its own attempt's row.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note' AND "
                      "(args->>'attempt')::int <> CASE args->>'event' "
                      "WHEN 'retried' THEN 1 ELSE 2 END")
             == 0);
  // The work was shared.
  BOOST_TEST(s.scalar("SELECT count(DISTINCT split_part(locked_by, ':', 1)) "
                      "FROM jobs_live WHERE kind = 'trigger'")
             >= 2);
}

BOOST_AUTO_TEST_SUITE_END()
