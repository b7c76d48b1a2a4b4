// The lifecycle-hook and follow-up behaviours of the spec
// (shared/spec/lifecycle-hooks.txt) that no other suite would catch
// breaking, against a real database: hooks of typed handlers, rescue
// events by reason (stale heartbeat, deadline), no event for a stale
// outcome, hooks that read committed state, follow-up INSERTs the database
// refuses (worker and callback paths), and follow-ups with unique and
// run_at.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/messages/async.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "log_capture.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"
#include "lifecycle_helpers.hpp"
#include "support/recorded_starts.hpp"

using namespace std::chrono_literals;
using aw::event_type;
using aw::test::contains;
using aw::test::dead_where;
using aw::test::field;
using aw::test::job_where;
using aw::test::script;
using aw::test::step;
using json = nlohmann::json;

namespace {

using aw::test::log_capture;

constexpr auto patience = std::chrono::seconds{60};

/// Rescue runs after every heartbeat: short ones keep the rescue tests to
/// a few seconds. The heartbeat is also the grace a handler gets after its
/// deadline before it is given up. A reclaim window of 1 s (the shortest
/// valid one) is how long a dead worker's lease takes to go stale.
aw::runtime_config fast_rescue_config(const aw::test::fresh_database& db,
                                      std::chrono::milliseconds reclaim_window) {
  auto cfg = db.config(4);
  cfg.worker.heartbeat_interval = 300ms;
  cfg.worker.reclaim_window = reclaim_window;
  cfg.validate();
  return cfg;
}

/// The scripted handler (lifecycle_helpers.hpp) for `kind`.
void add_scripted(aw::registry& reg, const std::string& kind) {
  reg.add_raw(kind, [](const json& args, const aw::job_context& ctx) {
    return aw::test::scripted(args, ctx);
  });
}

/// A no-op `sentinel` kind whose events go to `log`, for flush_events().
void add_sentinel(aw::registry& reg, aw::test::event_log& log) {
  reg.add_raw("sentinel", [](const json&, const aw::job_context&) {});
  reg.on_event_kind("sentinel", log.hook());
}

/// Returns once the events committed before the call have reached the
/// hooks: the dispatcher runs events in order, and a sentinel job enqueued
/// now has its `completed` event dispatched after them.
void flush_events(const aw::test::fresh_database& db, aw::test::event_log& log) {
  auto id = aw::test::enqueue_one(db, "sentinel");
  BOOST_REQUIRE_MESSAGE(log.wait_for(id, event_type::completed, 1, patience),
                        "the sentinel job " << id << " never completed");
}

/// Handlers block here until the test opens it (or `max_wait` passes),
/// ignoring their cancellation.
struct gate {
  std::mutex mtx;
  std::condition_variable cv;
  bool open = false;

  void pass(std::chrono::milliseconds max_wait) {
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait_for(guard, max_wait, [this] { return open; });
  }

  void release() {
    std::lock_guard<std::mutex> guard{mtx};
    open = true;
    cv.notify_all();
  }
};

/// Opens a gate when it goes out of scope. Declare it after the node, so
/// blocked handlers return before the node's teardown waits for them.
struct gate_opener {
  gate& g;
  ~gate_opener() {
    g.release();
  }
};

/// A job_store of another worker, for jobs the node under test must find
/// claimed, rescued or reclaimed by someone else.
std::unique_ptr<aw::storage::job_store>
other_worker(const aw::test::fresh_database& db, const std::string& worker_id,
             std::chrono::milliseconds reclaim_window = 120s) {
  aw::storage::job_store_options o;
  o.url = db.url;
  o.worker_id = worker_id;
  o.reclaim_window = reclaim_window;
  return std::make_unique<aw::storage::job_store>(o);
}

/// Follow-up args the database refuses: PostgreSQL's jsonb cannot store
/// the character U+0000, which nlohmann serializes as "\u0000" and every
/// check before the INSERT lets through.
json refused_args(int64_t trigger) {
  return {{"trigger", trigger}, {"body", std::string("a\0b", 3)}};
}

std::string id_list(const std::vector<int64_t>& ids) {
  std::string out;
  for (auto id : ids)
    out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(spec_hooks_test)

// -- 1. hooks of typed handlers --------------------------------------------------

namespace {

struct invoice {
  std::string customer;
  int cents = 0;
  std::vector<std::string> lines;
  /// Ask to be retried on the first attempt.
  bool retry_first = false;
};

void from_json(const json& j, invoice& a) {
  j.at("customer").get_to(a.customer);
  j.at("cents").get_to(a.cents);
  j.at("lines").get_to(a.lines);
  a.retry_first = j.value("retry_first", false);
}

/// What a typed hook saw of one event.
struct typed_seen {
  event_type type;
  int64_t job_id;
  int attempt;
  invoice args;
};

} // namespace

BOOST_AUTO_TEST_CASE(hooks_of_typed_handler_kinds_fire_for_every_event_with_the_args_parsed) {
  aw::test::fresh_database db;
  aw::test::event_log log;
  std::mutex mtx;
  std::vector<typed_seen> typed;
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  // Each way to register a typed handler. A job completes at once (its
  // hooks see started, completed) or asks to be retried first (started,
  // retried, started, completed): lane and row-per-state transitions.
  auto outcome_of = [](const invoice& a, const aw::job_context& ctx) {
    if (a.cents != 4200) // parsed for the handler too
      throw aw::terminal_error("args not parsed");
    return a.retry_first && ctx.attempt == 1
             ? aw::outcome::retry_after(20ms, "first try")
             : aw::outcome::completed();
  };
  reg->add<invoice>("invoice_blocking", outcome_of);
  reg->add<invoice>("invoice_inline", outcome_of, aw::non_blocking);
  reg->add_async<invoice>(
    "invoice_async", [outcome_of](const invoice& a, const aw::async_context& ctx,
                                  aw::job_promise done) {
      done.finish(outcome_of(a, ctx));
    });
  const std::vector<std::string> kinds = {"invoice_blocking", "invoice_inline",
                                          "invoice_async"};
  for (auto& kind : kinds) {
    reg->on_event<invoice>(kind, [&](const aw::typed_event<invoice>& e) {
      std::lock_guard<std::mutex> guard{mtx};
      typed.push_back({e.type, e.job_id(), e.attempt, e.args});
    });
    reg->on_event_kind(kind, log.hook());
  }
  aw::test::worker_node node{db.config(4), std::move(reg)};
  std::vector<std::pair<int64_t, json>> jobs;
  for (auto& kind : kinds)
    for (bool retry_first : {false, true}) {
      // The customer names the job, so one job's args can't pass for another's.
      json args = {{"customer", kind + (retry_first ? "/retried" : "/at once")},
                   {"cents", 4200},
                   {"lines", {"tea", "cake"}},
                   {"retry_first", retry_first}};
      jobs.emplace_back(aw::test::enqueue_one(db, kind, args), args);
    }
  for (auto& [id, args] : jobs)
    BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  flush_events(db, log);
  std::lock_guard<std::mutex> guard{mtx};
  for (auto& [id, args] : jobs)
    BOOST_TEST_CONTEXT("job " << id << " of kind " << args.at("customer")) {
      std::vector<std::pair<event_type, int>> seen;
      for (auto& t : typed)
        if (t.job_id == id) {
          seen.emplace_back(t.type, t.attempt);
          BOOST_TEST(t.args.customer == args.at("customer").get<std::string>());
          BOOST_TEST(t.args.cents == 4200);
          BOOST_TEST(t.args.lines == (std::vector<std::string>{"tea", "cake"}));
        }
      std::sort(seen.begin(), seen.end(), [](auto& a, auto& b) {
        return std::make_pair(a.second, static_cast<int>(a.first))
               < std::make_pair(b.second, static_cast<int>(b.first));
      });
      using seq = std::vector<std::pair<event_type, int>>;
      auto expected = args.at("retry_first").get<bool>()
                        ? seq{{event_type::started, 1},
                              {event_type::retried, 1},
                              {event_type::started, 2},
                              {event_type::completed, 2}}
                        : seq{{event_type::started, 1}, {event_type::completed, 1}};
      BOOST_TEST((seen == expected));
      // The raw hook of the same kind got the job's args as enqueued.
      auto raw = log.of(id);
      BOOST_TEST(raw.size() == expected.size());
      for (auto& e : raw)
        BOOST_TEST(e.job.at("args") == args);
    }
}

// -- 2. rescue of a stale lease ------------------------------------------------------

BOOST_AUTO_TEST_CASE(stale_lease_of_a_dead_worker_is_rescued_with_a_rescued_event_of_reason_stale_heartbeat) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  // Three jobs a worker claimed before it died (it never heartbeats or
  // finishes them): one on a lane, one row-per-state (an ordering key
  // takes that path), one on its last attempt.
  auto lane = aw::test::enqueue_one(db, "orphan", {{"n", 1}});
  aw::insert_options keyed;
  keyed.ordering_key = "k";
  auto row = aw::test::enqueue_one(db, "orphan", {{"n", 2}}, keyed);
  aw::insert_options once;
  once.max_attempts = 1;
  auto last = aw::test::enqueue_one(db, "orphan", {{"n", 3}}, once);
  const std::string dead_worker = "dead-node:4242:0badf00d";
  {
    auto dead = other_worker(db, dead_worker);
    auto claimed = dead->claim("default", 10);
    BOOST_REQUIRE_EQUAL(claimed.jobs.size(), 3u);
    // Their handlers started (a rescue charges only those).
    std::vector<aw::held_job> started;
    for (auto& j : claimed.jobs)
      started.push_back({j.id, j.lease, 0});
    dead->record_starts(started);
  }
  BOOST_REQUIRE_EQUAL(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' "
                               "AND locked_by = '" + dead_worker + "'"),
                      3);
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "orphan");
  reg->on_event_kind("orphan", log.hook());
  aw::test::worker_node node{fast_rescue_config(db, 1s), std::move(reg)};
  for (auto id : {lane, row, last})
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_REQUIRE(log.wait_for(id, event_type::rescued, 1, patience));
      auto e = log.of(id, event_type::rescued).at(0);
      BOOST_TEST((e.reason == aw::rescue_reason::stale_heartbeat));
      BOOST_TEST_MESSAGE("message: " << e.message);
      BOOST_TEST(contains(e.message, "lease expired"));
      BOOST_TEST(contains(e.message, dead_worker));
      BOOST_TEST(e.job.value("error_count", -1) == 1);
      BOOST_TEST(e.job.value("attempt", -1) == 1);
    }
  // Charged and rescheduled, or dead-lettered on its last attempt; the
  // event carries that committed row.
  for (auto id : {lane, row}) {
    BOOST_TEST(field(log.of(id, event_type::rescued).at(0).job, "state")
               == "scheduled");
    BOOST_TEST(s.scalar("SELECT error_count" + job_where(id)) == 1);
  }
  BOOST_TEST(log.of(last, event_type::rescued).at(0).job.value("original_job_id",
                                                                int64_t{0})
             == last);
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(last)) == 1);
  // Neither an exhausted nor a retried event stands in for the rescue.
  for (auto id : {lane, row, last}) {
    BOOST_TEST(log.count(id, event_type::exhausted) == 0u);
    BOOST_TEST(log.count(id, event_type::retried) == 0u);
  }
  // The rescuing node runs them again (skipping the backoff).
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id IN (" + id_list({lane, row}) + ")");
  for (auto id : {lane, row})
    BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  BOOST_TEST(log.count(lane, event_type::rescued) == 1u);
}

/// Kind "polite": waits for its cancellation on the first attempt and
/// then returns normally (a cooperative handler); completes at once on the
/// next.
void add_polite(aw::registry& reg) {
  reg.add_raw("polite", [](const json&, const aw::job_context& ctx) {
    if (ctx.attempt != 1)
      return;
    auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!ctx.cancel.cancelled() && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(5ms);
  });
}

/// The follow-up a rescue enqueues (on_rescued_enqueue): what it saw.
struct rescue_note {
  static constexpr const char* kind = "rescue_note";
  json body;
};

void to_json(json& j, const rescue_note& n) {
  j = n.body;
}

/// Registers on_rescued_enqueue for `kind`: a rescue_note naming the
/// trigger, the reason and the committed row's error_count.
void add_rescue_note(aw::registry& reg, const std::string& kind) {
  reg.on_rescued_enqueue<json>(kind, [](const json&, const json& job,
                                        aw::rescue_reason reason) {
    auto trigger = job.contains("original_job_id") ? job.at("original_job_id")
                                                   : job.at("id");
    return rescue_note{{{"trigger", trigger},
                        {"reason", aw::to_string(reason)},
                        {"error_count", job.at("error_count")}}};
  });
}

/// The rescue_notes of trigger `id`, as their args.
std::vector<json> rescue_notes_of(aw::test::db_session& s, int64_t id) {
  std::vector<json> out;
  auto text = s.text("SELECT coalesce(json_agg(args)::text, '[]') FROM jobs_in "
                     "WHERE kind = 'rescue_note' AND (args->>'trigger')::bigint = "
                     + std::to_string(id));
  for (auto& n : json::parse(text))
    out.push_back(n);
  return out;
}

BOOST_AUTO_TEST_CASE(a_stale_heartbeat_rescue_enqueues_its_follow_up_once_with_the_rescue) {
  // on_rescued_enqueue for the rescue of a dead worker's jobs, on and off
  // the lanes and on the last attempt: one follow-up per rescue, committed
  // with it, naming the reason.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto lane = aw::test::enqueue_one(db, "orphan", {{"n", 1}});
  aw::insert_options keyed;
  keyed.ordering_key = "k";
  auto row = aw::test::enqueue_one(db, "orphan", {{"n", 2}}, keyed);
  aw::insert_options once;
  once.max_attempts = 1;
  auto last = aw::test::enqueue_one(db, "orphan", {{"n", 3}}, once);
  {
    auto dead = other_worker(db, "dead-node:4243:0badf00d");
    auto claimed = dead->claim("default", 10);
    BOOST_REQUIRE_EQUAL(claimed.jobs.size(), 3u);
    std::vector<aw::held_job> started;
    for (auto& j : claimed.jobs)
      started.push_back({j.id, j.lease, 0});
    dead->record_starts(started);
  }
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  add_scripted(*reg, "orphan");
  reg->on_event_kind("orphan", log.hook());
  add_rescue_note(*reg, "orphan");
  aw::test::worker_node node{fast_rescue_config(db, 1s), std::move(reg)};
  for (auto id : {lane, row, last})
    BOOST_REQUIRE(log.wait_for(id, event_type::rescued, 1, patience));
  // The rescued jobs run again and complete; no later pass rescues (or
  // notes) them again.
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id IN (" + id_list({lane, row}) + ")");
  for (auto id : {lane, row})
    BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  flush_events(db, log);
  for (auto id : {lane, row, last})
    BOOST_TEST_CONTEXT("job " << id) {
      auto notes = rescue_notes_of(s, id);
      BOOST_REQUIRE_EQUAL(notes.size(), 1u);
      BOOST_TEST(notes[0].at("reason") == "stale heartbeat");
      BOOST_TEST(notes[0].at("error_count") == 1);
    }
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(last)) == 1);
}

// -- 3. rescue of a deadline overrun ---------------------------------------------------

BOOST_AUTO_TEST_CASE(deadline_overrun_whose_handler_ignores_cancellation_is_rescued_with_reason_deadline_exceeded) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  gate g;
  std::atomic<int> cancelled_while_blocked{0};
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  // Blocks past its deadline on its first attempt without looking at its
  // cancellation; completes on the next.
  reg->add_raw("stubborn", [&](const json&, const aw::job_context& ctx) {
    if (ctx.attempt == 1) {
      g.pass(30s);
      if (ctx.cancel.cancelled())
        ++cancelled_while_blocked;
    }
  });
  reg->on_event_kind("stubborn", log.hook());
  // A roomy reclaim window: slow heartbeats on a loaded machine must not
  // let the watchdog give the run up before its deadline does.
  aw::test::worker_node node{fast_rescue_config(db, 3s), std::move(reg)};
  gate_opener opener{g};
  aw::insert_options opts;
  opts.deadline = 200ms;
  opts.max_attempts = 3;
  auto id = aw::test::enqueue_one(db, "stubborn", {}, opts);
  aw::insert_options once = opts;
  once.max_attempts = 1;
  auto last = aw::test::enqueue_one(db, "stubborn", {}, once);
  // The run's outcome event, whichever it is.
  auto ended = [&](int64_t job) {
    return log.count(job, event_type::rescued) + log.count(job, event_type::retried)
             + log.count(job, event_type::exhausted)
           > 0;
  };
  for (auto job : {id, last})
    BOOST_TEST_CONTEXT("job " << job) {
      BOOST_REQUIRE(aw::test::wait_until([&] { return ended(job); }, patience));
      BOOST_REQUIRE_EQUAL(log.count(job, event_type::rescued), 1u);
      auto e = log.of(job, event_type::rescued).at(0);
      BOOST_TEST((e.reason == aw::rescue_reason::deadline_exceeded));
      BOOST_TEST_MESSAGE("message: " << e.message);
      BOOST_TEST(contains(e.message, "deadline exceeded"));
      BOOST_TEST(e.job.value("error_count", -1) == 1);
    }
  BOOST_TEST(field(log.of(id, event_type::rescued).at(0).job, "state") == "scheduled");
  BOOST_TEST(contains(s.text("SELECT last_error_message" + job_where(id)),
                      "deadline exceeded"));
  BOOST_TEST(log.of(last, event_type::rescued).at(0).job.value("original_job_id",
                                                                int64_t{0})
             == last);
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(last)) == 1);
  // The stuck handlers return now; their late results are dropped. The
  // job runs again (skipping the backoff) and completes.
  g.release();
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id = " + std::to_string(id));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  flush_events(db, log);
  // Both were cancelled, and ignored it.
  BOOST_TEST(aw::test::wait_until([&] { return cancelled_while_blocked.load() == 2; },
                                  patience));
  for (auto job : {id, last}) {
    // A rescue, not a handler failure: no retried or exhausted event.
    BOOST_TEST(log.count(job, event_type::retried) == 0u);
    BOOST_TEST(log.count(job, event_type::exhausted) == 0u);
    BOOST_TEST(log.count(job, event_type::rescued) == 1u);
  }
  BOOST_TEST(log.count(last, event_type::completed) == 0u);
  BOOST_TEST(log.of(id, event_type::completed).at(0).job.value("attempt", 0) == 2);
  BOOST_TEST(s.scalar("SELECT error_count" + job_where(id)) == 1);
}

BOOST_AUTO_TEST_CASE(a_deadline_rescue_enqueues_its_follow_up_once_with_the_rescue) {
  // on_rescued_enqueue for a run past its deadline, rescheduled or (on its
  // last attempt) dead-lettered: one follow-up per rescue, naming the reason.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  add_polite(*reg);
  reg->on_event_kind("polite", log.hook());
  add_rescue_note(*reg, "polite");
  aw::test::worker_node node{fast_rescue_config(db, 3s), std::move(reg)};
  aw::insert_options opts;
  opts.deadline = 200ms;
  opts.max_attempts = 3;
  auto id = aw::test::enqueue_one(db, "polite", {}, opts);
  aw::insert_options once = opts;
  once.max_attempts = 1;
  auto last = aw::test::enqueue_one(db, "polite", {}, once);
  for (auto job : {id, last})
    BOOST_REQUIRE(log.wait_for(job, event_type::rescued, 1, patience));
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id = " + std::to_string(id));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  flush_events(db, log);
  for (auto job : {id, last})
    BOOST_TEST_CONTEXT("job " << job) {
      auto notes = rescue_notes_of(s, job);
      BOOST_REQUIRE_EQUAL(notes.size(), 1u);
      BOOST_TEST(notes[0].at("reason") == "deadline exceeded");
      BOOST_TEST(notes[0].at("error_count") == 1);
    }
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(last)) == 1);
}

BOOST_AUTO_TEST_CASE(deadline_overrun_whose_handler_ends_on_cancellation_is_rescued_too) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  add_polite(*reg);
  reg->on_event_kind("polite", log.hook());
  aw::test::worker_node node{fast_rescue_config(db, 3s), std::move(reg)};
  aw::insert_options opts;
  opts.deadline = 200ms;
  opts.max_attempts = 3;
  auto id = aw::test::enqueue_one(db, "polite", {}, opts);
  aw::insert_options once = opts;
  once.max_attempts = 1;
  auto last = aw::test::enqueue_one(db, "polite", {}, once);
  for (auto job : {id, last})
    BOOST_TEST_CONTEXT("job " << job) {
      BOOST_REQUIRE(log.wait_for(job, event_type::rescued, 1, patience));
      auto e = log.of(job, event_type::rescued).at(0);
      BOOST_TEST((e.reason == aw::rescue_reason::deadline_exceeded));
      BOOST_TEST(contains(e.message, "deadline exceeded"));
      BOOST_TEST(e.job.value("error_count", -1) == 1);
    }
  BOOST_TEST(field(log.of(id, event_type::rescued).at(0).job, "state") == "scheduled");
  BOOST_TEST(s.scalar("SELECT count(*)" + dead_where(last)) == 1);
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id = " + std::to_string(id));
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  flush_events(db, log);
  for (auto job : {id, last}) {
    // The spec's Rescued, not a handler failure.
    BOOST_TEST(log.count(job, event_type::retried) == 0u);
    BOOST_TEST(log.count(job, event_type::exhausted) == 0u);
    BOOST_TEST(log.count(job, event_type::rescued) == 1u);
  }
}

// -- 4. no event for a stale outcome -----------------------------------------------------

BOOST_AUTO_TEST_CASE(stale_outcomes_of_jobs_reclaimed_under_their_handlers_fire_no_hook) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  log_capture captured;
  aw::test::event_log log;
  gate g;
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  // The first attempt waits for the test, then ends as scripted.
  reg->add_raw("held", [&](const json& args, const aw::job_context& ctx) {
    if (ctx.attempt == 1)
      g.pass(30s);
    return aw::test::scripted(args, ctx);
  });
  reg->on_event_kind("held", log.hook());
  // db.config's heartbeat (30 s) stays out of the way: the node itself
  // never notices the reclaim, so the outcomes reach storage and are
  // refused there.
  aw::test::worker_node node{db.config(5), std::move(reg)};
  gate_opener opener{g};
  // On a lane: a completion and a failure; row-per-state (ordering keys):
  // a completion, a failure and a cancel. Each ends through another
  // statement, each guarded by the run.
  auto keyed = [](const std::string& key) {
    aw::insert_options o;
    o.ordering_key = key;
    return o;
  };
  std::vector<int64_t> ids = {
    aw::test::enqueue_one(db, "held", script({step("complete")})),
    aw::test::enqueue_one(db, "held", script({step("throw", 0, "boom")})),
    aw::test::enqueue_one(db, "held", script({step("complete")}), keyed("c")),
    aw::test::enqueue_one(db, "held", script({step("throw", 0, "boom")}), keyed("d")),
    aw::test::enqueue_one(db, "held", script({step("cancel", 0, "no")}), keyed("e")),
  };
  for (auto id : ids)
    BOOST_REQUIRE(log.wait_for(id, event_type::started, 1, patience));
  // ...and the node recorded that they did (a rescue charges only those).
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar(aw::test::recorded_starts_sql)
             == static_cast<int64_t>(ids.size());
    },
    patience));
  // Another worker rescues them (as if this node had stalled) and claims
  // them again, writing their rows as its claim does.
  const std::string thief = "thief:1:0000beef";
  {
    auto other = other_worker(db, thief, 1ms);
    std::this_thread::sleep_for(10ms); // older than the 1 ms window
    BOOST_REQUIRE_EQUAL(other->rescue(100).size(), ids.size());
  }
  s.exec("INSERT INTO job_batches (id, queue, priority, worker, on_lane, size) "
         "VALUES (2, 'default', 0, '" + thief + "', false, 5)");
  s.exec("UPDATE jobs_in SET state = 'running', attempt = attempt + 1, "
         "batch_id = 2, ready_xid = '0', run_at = now() "
         "WHERE id IN (" + id_list(ids) + ")");
  auto rows_before = s.text("SELECT string_agg(to_jsonb(j)::text, ',' ORDER BY id) "
                            "FROM jobs_live AS j WHERE id IN (" + id_list(ids) + ")");
  g.release();
  // Each outcome ends refused as stale (or, were it recorded, with an
  // event beyond the `started`).
  auto refused = [&](int64_t id) {
    return captured.has("outcome of job " + std::to_string(id) + " not recorded");
  };
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return std::all_of(ids.begin(), ids.end(), [&](int64_t id) {
        return refused(id) || log.of(id).size() > 1;
      });
    },
    patience));
  flush_events(db, log);
  for (auto id : ids)
    BOOST_TEST_CONTEXT("job " << id) {
      BOOST_TEST(refused(id));
      // No event of the stale outcome reached the hooks: only the run's
      // `started`.
      auto events = log.of(id);
      BOOST_TEST(events.size() == 1u);
      for (auto& e : events)
        BOOST_TEST(aw::to_string(e.type) == std::string{"started"});
    }
  // The rows are the other worker's, untouched.
  BOOST_TEST(s.text("SELECT string_agg(to_jsonb(j)::text, ',' ORDER BY id) "
                    "FROM jobs_live AS j WHERE id IN (" + id_list(ids) + ")")
             == rows_before);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

// -- 5. hooks see committed state ------------------------------------------------------------

namespace {

/// What a hook read from the database when it got an event.
struct row_seen {
  event_type type;
  int64_t job_id;
  json event_row;
  json db_row;
};

/// The state a committed transition of type `t` leaves the row in
/// ("dead_lettered": moved to dead_letter_jobs).
std::vector<std::string> states_after(event_type t) {
  switch (t) {
    case event_type::completed:
      return {"completed"};
    case event_type::retried:
      return {"scheduled", "available"};
    case event_type::exhausted:
      return {"dead_lettered"};
    case event_type::cancelled:
      return {"cancelled"};
    case event_type::waiting_for_callback:
      return {"waiting_external"};
    default:
      return {};
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(hook_reading_the_job_row_over_its_own_connection_sees_the_committed_transition) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  std::mutex mtx;
  std::vector<row_seen> seen;
  // The hook's own connection, used only on the hook dispatcher's thread.
  auto conn = db.connect();
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  add_scripted(*reg, "probe");
  reg->on_event_kind("probe", [&, c = conn.get()](const aw::event& e) {
    pqxx::nontransaction tx{*c};
    auto row = tx.exec_params1(
      "SELECT coalesce("
      " (SELECT jsonb_build_object('state', state, 'attempt', attempt,"
      "   'error_count', error_count) FROM jobs_live WHERE id = $1),"
      " (SELECT jsonb_build_object('state', 'dead_lettered', 'attempt', attempt,"
      "   'error_count', error_count) FROM dead_letter_jobs"
      "   WHERE original_job_id = $1),"
      " '{\"state\": \"missing\"}'::jsonb)::text",
      e.job_id());
    {
      std::lock_guard<std::mutex> guard{mtx};
      seen.push_back({e.type, e.job_id(), e.job, json::parse(row[0].c_str())});
    }
    log.add(e);
  });
  // Follow-ups run inside the transaction of the transition, before its
  // commit: these take 150 ms there and insert nothing, so a hook
  // dispatched before the commit would read the row as it was before.
  auto slow = [](const auto&...) -> std::optional<aw::enqueue_request> {
    std::this_thread::sleep_for(150ms);
    return std::nullopt;
  };
  reg->on_completed_enqueue<json>("probe", slow);
  reg->on_retried_enqueue<json>("probe", slow);
  reg->on_exhausted_enqueue<json>("probe", slow);
  reg->on_cancelled_enqueue<json>("probe", slow);
  reg->on_waiting_for_callback_enqueue<json>("probe", slow);
  aw::test::worker_node node{db.config(8), std::move(reg)};
  auto completes = aw::test::enqueue_one(db, "probe", script({step("complete")}));
  auto retries = aw::test::enqueue_one(db, "probe", script({step("retry_after", 60000)}));
  auto fails = aw::test::enqueue_one(db, "probe", script({step("terminal", 0, "no")}));
  auto cancels = aw::test::enqueue_one(db, "probe", script({step("cancel", 0, "no")}));
  auto parked = aw::test::enqueue_one(db, "probe", script({step("wait", 3'600'000)}));
  auto parked_fail = aw::test::enqueue_one(db, "probe", script({step("wait", 3'600'000)}));
  BOOST_REQUIRE(log.wait_for(completes, event_type::completed, 1, patience));
  BOOST_REQUIRE(log.wait_for(retries, event_type::retried, 1, patience));
  BOOST_REQUIRE(log.wait_for(fails, event_type::exhausted, 1, patience));
  BOOST_REQUIRE(log.wait_for(cancels, event_type::cancelled, 1, patience));
  // The callback path: the hooks fire in this process after its commit.
  for (auto id : {parked, parked_fail})
    BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  node.rt().complete_external(s.text("SELECT callback_id::text" + job_where(parked)));
  node.rt().fail_external(s.text("SELECT callback_id::text" + job_where(parked_fail)),
                          "declined");
  BOOST_REQUIRE(log.wait_for(parked, event_type::completed, 1, patience));
  BOOST_REQUIRE(log.wait_for(parked_fail, event_type::exhausted, 1, patience));
  std::lock_guard<std::mutex> guard{mtx};
  size_t outcomes = 0;
  for (auto& r : seen)
    BOOST_TEST_CONTEXT(aw::to_string(r.type) << " of job " << r.job_id
                                            << ": the hook read " << r.db_row.dump()) {
      if (r.type == event_type::started) {
        // The claim committed (the run may have ended since).
        BOOST_TEST(r.db_row.value("attempt", -1) >= r.event_row.value("attempt", 0));
        continue;
      }
      ++outcomes;
      auto expected = states_after(r.type);
      auto state = r.db_row.value("state", std::string{});
      BOOST_TEST((std::find(expected.begin(), expected.end(), state) != expected.end()));
      // The row it read is the one the event carries.
      if (state != "dead_lettered")
        BOOST_TEST(state == field(r.event_row, "state"));
      BOOST_TEST(r.db_row.value("attempt", -1) == r.event_row.value("attempt", -2));
      BOOST_TEST(r.db_row.value("error_count", -1)
                 == r.event_row.value("error_count", -2));
    }
  // completed, retried, exhausted, cancelled, 2 x waiting, and the two
  // callback resolutions.
  BOOST_TEST(outcomes == 8u);
}

// -- 6. follow-up INSERT refused by the database ---------------------------------------------

BOOST_AUTO_TEST_CASE(follow_up_insert_refused_by_the_database_rolls_the_worker_outcome_back) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  std::atomic<bool> broken{true};
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "signup");
  reg->on_event_kind("signup", log.hook());
  // Welcome mails go to a queue this node does not serve: they stay put.
  reg->on_completed_enqueue<json>(
    "signup", [&broken](const json& args, const json& job) {
      aw::enqueue_request r;
      r.kind = "welcome";
      auto trigger = job.at("id").get<int64_t>();
      r.args = broken && args.value("bad", false) ? refused_args(trigger)
                                                  : json{{"trigger", trigger}};
      r.options.queue = "mail";
      return r;
    });
  // One bad follow-up among ten: they complete in the same batches, which
  // the database refuses whole.
  std::vector<aw::enqueue_request> requests;
  for (int i = 0; i < 10; ++i)
    requests.push_back({"signup", {{"user", i}, {"bad", i == 4}}, {}});
  aw::test::worker_node node{db.config(8), std::move(reg)};
  auto ids = aw::test::enqueue_all(db, requests);
  auto bad = ids.at(4);
  auto welcomes_of = [&](int64_t id) {
    return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome' "
                    "AND (args->>'trigger')::bigint = " + std::to_string(id));
  };
  BOOST_REQUIRE(log.wait_for(bad, event_type::retried, 1, patience));
  BOOST_REQUIRE(log.wait_for_total(event_type::completed, 9, patience));
  // The completion was rolled back with the INSERT; the run is recorded
  // as a retryable failure instead, naming the database's refusal.
  auto retried = log.of(bad, event_type::retried).at(0).job;
  BOOST_TEST(field(retried, "state") == "scheduled");
  BOOST_TEST(retried.value("error_count", -1) == 1);
  auto message = field(retried, "last_error_message");
  BOOST_TEST_MESSAGE("message: " << message);
  BOOST_TEST(contains(message, "recording the outcome (completed) failed"));
  BOOST_TEST(contains(message, "\\u0000"));
  BOOST_TEST(s.text("SELECT state" + job_where(bad)) != "completed");
  BOOST_TEST(welcomes_of(bad) == 0);
  BOOST_TEST(log.count(bad, event_type::completed) == 0u);
  // The other nine committed with one follow-up each.
  for (auto id : ids)
    if (id != bad)
      BOOST_TEST_CONTEXT("job " << id) {
        BOOST_TEST(s.text("SELECT state" + job_where(id)) == "completed");
        BOOST_TEST(welcomes_of(id) == 1);
      }
  // Repaired, it runs again (skipping the backoff) and both commit.
  broken = false;
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      s.exec("UPDATE jobs_in SET run_at = now() WHERE state = 'scheduled' "
             "AND kind = 'signup'");
      return log.count(bad, event_type::completed) == 1;
    },
    patience));
  BOOST_TEST(s.text("SELECT state" + job_where(bad)) == "completed");
  BOOST_TEST(welcomes_of(bad) == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'welcome'") == 10);
  BOOST_TEST(!node.rt().wait_for(0ms).has_value());
}

BOOST_AUTO_TEST_CASE(follow_up_insert_refused_by_the_database_refuses_the_callback_resolution_and_leaves_the_job_waiting) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  std::atomic<bool> broken{true};
  auto reg = std::make_shared<aw::registry>();
  add_sentinel(*reg, log);
  add_scripted(*reg, "approval");
  reg->on_event_kind("approval", log.hook());
  auto note = [&broken](const std::string& event) {
    return [&broken, event](const json& job) {
      aw::enqueue_request r;
      r.kind = "note";
      auto trigger = job.value(job.contains("original_job_id") ? "original_job_id" : "id",
                               int64_t{0});
      r.args = broken ? refused_args(trigger)
                      : json{{"trigger", trigger}, {"event", event}};
      r.options.queue = "notes";
      return r;
    };
  };
  reg->on_completed_enqueue<json>(
    "approval", [f = note("completed")](const json&, const json& job) { return f(job); });
  reg->on_exhausted_enqueue<json>(
    "approval", [f = note("exhausted")](const json&, const json& job,
                                        const std::string&, int) { return f(job); });
  reg->on_retried_enqueue<json>(
    "approval", [f = note("retried")](const json&, const json& job, const std::string&,
                                      int, const std::string&) { return f(job); });
  aw::test::worker_node node{db.config(4), std::move(reg)};
  auto& rt = node.rt();
  auto id = aw::test::enqueue_one(db, "approval", script({step("wait", 3'600'000)}));
  BOOST_REQUIRE(log.wait_for(id, event_type::waiting_for_callback, 1, patience));
  auto w = job_where(id);
  auto callback_id = s.text("SELECT callback_id::text" + w);
  auto row = [&] {
    return s.text("SELECT to_jsonb(j)::text FROM jobs_live AS j WHERE id = "
                  + std::to_string(id));
  };
  auto before = row();
  std::vector<std::pair<std::string, std::function<void()>>> attempts = {
    {"complete", [&] { rt.complete_external(callback_id, {{"ok", true}}); }},
    {"fail", [&] { rt.fail_external(callback_id, "denied"); }},
    {"retry", [&] { rt.retry_external(callback_id); }},
    {"resolve", [&] { rt.resolve_callback(callback_id, {{"ok", 1}}, "complete"); }},
  };
  for (auto& [name, fn] : attempts)
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
      BOOST_TEST(contains(err->what(), "\\u0000")); // the database's refusal
      // Still waiting, unchanged, and nothing inserted.
      BOOST_TEST(s.text("SELECT state" + w) == "waiting_external");
      BOOST_TEST(row() == before);
      BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note'") == 0);
      BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
    }
  flush_events(db, log);
  BOOST_TEST(log.of(id).size() == 2u); // started, waiting_for_callback
  // The sender retries once the follow-up is accepted: both commit.
  broken = false;
  rt.complete_external(callback_id, {{"ok", true}});
  BOOST_TEST(s.text("SELECT state" + w) == "completed");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'note' "
                      "AND args->>'event' = 'completed' "
                      "AND (args->>'trigger')::bigint = " + std::to_string(id))
             == 1);
  BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
}

// -- 7. follow-ups with unique and run_at -------------------------------------------------

BOOST_AUTO_TEST_CASE(follow_up_with_unique_and_run_at_is_deduplicated_and_scheduled_at_the_requested_time) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::test::event_log log;
  // 2031-02-03T04:05:06.654321Z, to the microsecond.
  const std::chrono::system_clock::time_point at{
    std::chrono::microseconds{1927857906654321}};
  auto reminder_options = [&] {
    aw::insert_options o;
    o.queue = "reminders"; // not served here: the rows stay put
    o.unique = aw::unique_options{};
    o.run_at = at;
    return o;
  };
  auto reg = std::make_shared<aw::registry>();
  add_scripted(*reg, "order");
  reg->on_event_kind("order", log.hook());
  reg->on_completed_enqueue<json>("order", [&](const json& args, const json&) {
    aw::enqueue_request r;
    r.kind = "reminder";
    r.args = {{"customer", args.at("customer")}};
    r.options = reminder_options();
    return r;
  });
  aw::test::worker_node node{db.config(4), std::move(reg)};
  // Two orders of ada (one reminder between them), one of bob.
  std::vector<int64_t> orders;
  for (auto* customer : {"ada", "bob", "ada"})
    orders.push_back(aw::test::enqueue_one(db, "order", {{"customer", customer}}));
  for (auto id : orders)
    BOOST_REQUIRE(log.wait_for(id, event_type::completed, 1, patience));
  auto reminders = std::string{" FROM jobs_live WHERE kind = 'reminder'"};
  BOOST_TEST(s.scalar("SELECT count(*)" + reminders) == 2);
  for (auto* customer : {"ada", "bob"})
    BOOST_TEST_CONTEXT(customer) {
      auto where = reminders + " AND args->>'customer' = '" + customer + "'";
      BOOST_REQUIRE_EQUAL(s.scalar("SELECT count(*)" + where), 1);
      BOOST_TEST(s.check("SELECT run_at = '2031-02-03 04:05:06.654321+00'::timestamptz"
                         + where));
      BOOST_TEST(s.text("SELECT state" + where) == "scheduled");
      BOOST_TEST(s.text("SELECT queue" + where) == "reminders");
      BOOST_TEST(!s.text("SELECT unique_key" + where).empty());
      BOOST_TEST(s.check("SELECT unique_states = ARRAY['scheduled', 'available', "
                         "'running', 'waiting_external', 'completed']::text[]"
                         + where));
      // It holds the job's unique key: the application enqueueing the same
      // unique job gets the follow-up's id, and no second row.
      auto existing = s.scalar("SELECT id" + where);
      auto c = db.connect();
      pqxx::work tx{*c};
      auto again = aw::enqueue(tx, "reminder", {{"customer", customer}},
                               reminder_options());
      tx.commit();
      BOOST_TEST(again == existing);
      BOOST_TEST(s.scalar("SELECT count(*)" + where) == 1);
    }
}

BOOST_AUTO_TEST_SUITE_END()
