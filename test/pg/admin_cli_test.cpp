// The admin CLI against a real database: jobs list|cancel|retry, dlq
// show|retry|purge, the new enqueue flags and bulk enqueue, dead letter
// retention, and the rough edges of issue 10 (invalid UTF-8, duplicate
// --unique, unknown commands of a group). `jobs cancel` of a running job is
// tested through a real `actor-worker run`.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "cli_process.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;
using aw::test::background_process;
using aw::test::contains;
using aw::test::run_binary;
using aw::test::temp_file;

namespace {

int64_t enqueue_one(const aw::test::fresh_database& db, const std::string& kind,
                    const nlohmann::json& args = nlohmann::json::object(),
                    const aw::insert_options& opts = {}) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, kind, args, opts);
  tx.commit();
  return id;
}

aw::storage::job_store make_store(const aw::test::fresh_database& db,
                                  const std::string& worker = "w1") {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker;
  opts.completed_retention = 1h;
  return aw::storage::job_store{opts};
}

std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (auto& [key, value] : object.items())
    keys.insert(key);
  return keys;
}

std::string state_of(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT state FROM jobs_live WHERE id = " + std::to_string(id));
}

/// Dead-letters a new job of `kind` in `queue` (as a worker would) and
/// returns {dead letter id, original job id}.
std::pair<int64_t, int64_t> dead_letter(const aw::test::fresh_database& db,
                                        const std::string& kind,
                                        const std::string& queue = "default") {
  auto id = db.scalar("INSERT INTO jobs_in (kind, queue, state, attempt, "
                      "priority, args, metadata, tags, max_attempts, ready_xid) "
                      "VALUES ('" + kind + "', '" + queue
                      + "', 'running', 3, -2, '{\"n\": 7}', "
                        "'{\"trace\": \"t-1\"}', '{red,blue}', 3, '0') "
                        "RETURNING id");
  auto dead = db.scalar("SELECT (actor_worker_dead_letter(" + std::to_string(id)
                        + ", 'boom')::jsonb->>'id')::bigint");
  return {dead, id};
}

} // namespace

BOOST_AUTO_TEST_SUITE(admin_cli_test)

// -- jobs list ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(jobs_list_pages_by_id_and_filters_by_state_queue_and_kind) {
  aw::test::fresh_database db;
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(enqueue_one(db, i % 2 == 0 ? "even" : "odd", {{"i", i}}));
  aw::insert_options mail;
  mail.queue = "mail";
  mail.delay = 1h;
  auto scheduled = enqueue_one(db, "even", {}, mail);
  // Job ids[0] and ids[1] run (claimed on a lane: state derived).
  auto store = make_store(db);
  auto claimed = store.claim("default", 2);
  BOOST_REQUIRE_EQUAL(claimed.jobs.size(), 2u);

  auto page = [&](const std::string& args) {
    auto r = run_binary("jobs list --json " + args, db.url);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return nlohmann::json::parse(r.out);
  };
  auto ids_in = [](const nlohmann::json& rows) {
    std::vector<int64_t> out;
    for (auto& r : rows)
      out.push_back(r["id"].get<int64_t>());
    return out;
  };
  auto all = page("");
  BOOST_REQUIRE_EQUAL(all.size(), 6u);
  aw::test::db_session s{db.url};
  BOOST_TEST(keys_of(all[0]) == s.columns_of("jobs_live"));
  // Keyset pagination: --limit, then --after the last id shown.
  auto first = page("--limit 4");
  BOOST_TEST(ids_in(first)
               == (std::vector<int64_t>{ids[0], ids[1], ids[2], ids[3]}),
             boost::test_tools::per_element());
  auto next = page("--limit 4 --after " + std::to_string(ids[3]));
  BOOST_TEST(ids_in(next) == (std::vector<int64_t>{ids[4], scheduled}),
             boost::test_tools::per_element());
  BOOST_TEST(page("--after " + std::to_string(scheduled)).empty());
  // Filters, derived states included.
  BOOST_TEST(ids_in(page("--state running"))
               == (std::vector<int64_t>{ids[0], ids[1]}),
             boost::test_tools::per_element());
  BOOST_TEST(ids_in(page("--state available"))
               == (std::vector<int64_t>{ids[2], ids[3], ids[4]}),
             boost::test_tools::per_element());
  BOOST_TEST(ids_in(page("--state scheduled"))
               == (std::vector<int64_t>{scheduled}),
             boost::test_tools::per_element());
  BOOST_TEST(ids_in(page("--queue mail")) == (std::vector<int64_t>{scheduled}),
             boost::test_tools::per_element());
  BOOST_TEST(ids_in(page("--kind odd --state available"))
               == (std::vector<int64_t>{ids[3]}),
             boost::test_tools::per_element());
  BOOST_TEST(page("--state completed").empty());
  // The human table: a header, one line per job, a hint when the page is
  // full.
  auto r = run_binary("jobs list --limit 2", db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(contains(r.out, "ID"));
  BOOST_TEST(contains(r.out, "STATE"));
  BOOST_TEST(contains(r.out, "running"));
  BOOST_TEST(std::count(r.out.begin(), r.out.end(), '\n') == 3);
  BOOST_TEST(contains(r.err, "--after " + std::to_string(ids[1])), r.err);
}

BOOST_AUTO_TEST_CASE(jobs_list_with_an_unknown_state_exits_2_listing_the_states) {
  aw::test::fresh_database db;
  auto r = run_binary("jobs list --state bogus", db.url);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "'bogus' is not a job state"), r.err);
  BOOST_TEST(contains(r.err, "scheduled, available, running, "
                             "waiting_external, completed, cancelled"),
             r.err);
}

BOOST_AUTO_TEST_CASE(jobs_list_by_state_uses_an_index_on_a_big_table) {
  aw::test::fresh_database db;
  db.exec("INSERT INTO jobs_in (kind, state, finalized_at) "
          "SELECT 'k', 'completed', now() FROM generate_series(1, 20000)");
  db.exec("INSERT INTO jobs_in (kind, state, run_at) "
          "SELECT 'k', 'scheduled', now() + interval '1 day' "
          "FROM generate_series(1, 3)");
  db.exec("ANALYZE jobs_in");
  auto started = std::chrono::steady_clock::now();
  auto r = run_binary("jobs list --json --state scheduled", db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(nlohmann::json::parse(r.out).size() == 3u);
  BOOST_TEST((std::chrono::steady_clock::now() - started < 5s));
  // The plan reads the 3 rows through an index, not 20,003.
  aw::test::db_session s{db.url};
  std::string plan;
  // (storage/sql/admin_jobs.sql:admin_jobs_list for --state scheduled: the view's
  // other branches drop out, and the one left reads jobs_due_idx.)
  for (auto row : s.query("EXPLAIN SELECT j.id FROM jobs AS j "
                          "WHERE j.id > 0 AND j.state = 'scheduled' "
                          "ORDER BY j.id LIMIT 20"))
    plan += row[0].as<std::string>() + "\n";
  BOOST_TEST_MESSAGE(plan);
  // The ring slot that holds the rows is read by an index (the empty
  // ones cost nothing either way).
  auto slot = s.text("SELECT min(slot)::text FROM jobs_in");
  BOOST_TEST(!contains(plan, "Seq Scan on jobs_slot_" + slot + " "), plan);
  BOOST_TEST(contains(plan, "Index"), plan);
}

// -- jobs cancel -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(jobs_cancel_of_a_waiting_job_cancels_it_at_once) {
  aw::test::fresh_database db;
  auto available = enqueue_one(db, "noop");
  aw::insert_options later;
  later.delay = 1h;
  auto scheduled = enqueue_one(db, "noop", {}, later);
  auto waiting = db.scalar("INSERT INTO jobs_in (kind, state, callback_id, "
                           "callback_timeout_at) VALUES ('await', "
                           "'waiting_external', gen_random_uuid(), now() + "
                           "interval '1 hour') RETURNING id");
  aw::test::db_session s{db.url};
  for (auto id : {available, scheduled, waiting})
    BOOST_TEST_CONTEXT("job " << id) {
      auto r = run_binary("jobs cancel " + std::to_string(id), db.url);
      BOOST_TEST(r.exit_code == 0, r.err);
      BOOST_TEST(r.out == "job " + std::to_string(id) + " cancelled\n");
      BOOST_TEST(state_of(s, id) == "cancelled");
      BOOST_TEST(s.check("SELECT finalized_at IS NOT NULL FROM jobs_live WHERE id = "
                         + std::to_string(id)));
    }
  // A cancelled lane job is off its lane: no claim takes it.
  auto store = make_store(db);
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  // --json
  auto other = enqueue_one(db, "noop");
  auto r = run_binary("jobs cancel --json " + std::to_string(other), db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(nlohmann::json::parse(r.out)
             == (nlohmann::json{{"id", other}, {"state", "cancelled"}}));
}

BOOST_AUTO_TEST_CASE(jobs_cancel_of_a_finished_or_unknown_job_exits_1_saying_why) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "noop");
  auto r = run_binary("jobs cancel " + std::to_string(id), db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  r = run_binary("jobs cancel " + std::to_string(id), db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "already finished (cancelled)"), r.err);
  r = run_binary("jobs cancel 987654", db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "job 987654 not found"), r.err);
  auto [dead, original] = dead_letter(db, "gone");
  r = run_binary("jobs cancel " + std::to_string(original), db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "dead letter " + std::to_string(dead)), r.err);
}

BOOST_AUTO_TEST_CASE(jobs_cancel_of_a_running_job_records_the_request_and_notifies) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "noop");
  auto store = make_store(db);
  BOOST_REQUIRE_EQUAL(store.claim("default", 1).jobs.size(),
                      1u);
  // Nobody runs it here: the CLI records the request, sends the NOTIFY,
  // and after --wait says the job still runs.
  pqxx::connection listener{db.url};
  struct receiver : pqxx::notification_receiver {
    using pqxx::notification_receiver::notification_receiver;
    std::vector<std::string> payloads;
    void operator()(const std::string& payload, int) override {
      payloads.push_back(payload);
    }
  } recv{listener, "actor_worker_cancel"};
  listener.get_notifs();
  auto r = run_binary("jobs cancel --wait 200ms " + std::to_string(id),
                      db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "cancel requested; it still runs on w1"), r.out);
  aw::test::db_session s{db.url};
  BOOST_TEST(state_of(s, id) == "running");
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_cancel_requests WHERE job_id = "
                      + std::to_string(id))
             == 1);
  aw::test::wait_until(
    [&] {
      listener.await_notification(0, 100'000);
      return !recv.payloads.empty();
    },
    5s);
  BOOST_TEST(recv.payloads == (std::vector<std::string>{std::to_string(id)}),
             boost::test_tools::per_element());
  // The worker finds it on its heartbeat too.
  BOOST_TEST(store.cancel_requests({id, id + 1}) == (std::vector<int64_t>{id}),
             boost::test_tools::per_element());
}

namespace {

/// A worker config with a short heartbeat (the durable cancel check runs on
/// it).
const char* fast_worker_toml = R"(
[worker]
heartbeat_interval = "1s"
reclaim_window = "3s"
poll_interval = "200ms"
)";

/// Starts `actor-worker run` and a long `sleep` job, and waits until the
/// job runs. Returns the job id.
int64_t start_sleeping_job(const aw::test::fresh_database& db,
                           background_process& worker,
                           aw::test::db_session& s) {
  auto id = enqueue_one(db, "sleep", {{"ms", 120'000}});
  BOOST_REQUIRE_MESSAGE(
    aw::test::wait_until(
      [&] { return !worker.running() || state_of(s, id) == "running"; }, 60s)
      && worker.running(),
    "the job did not start; stderr: " << worker.err());
  return id;
}

} // namespace

BOOST_AUTO_TEST_CASE(jobs_cancel_stops_a_job_running_on_a_real_worker) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  temp_file config{fast_worker_toml};
  background_process worker{{"run", "--config", config.path}, db.url};
  auto id = start_sleeping_job(db, worker, s);
  auto started = std::chrono::steady_clock::now();
  auto r = run_binary("jobs cancel " + std::to_string(id), db.url);
  BOOST_TEST_MESSAGE("worker stderr: " << worker.err());
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "job " + std::to_string(id) + " cancelled (it "
                             "was running on "),
             r.out);
  // Through the NOTIFY, not the 1 s heartbeat... well under it anyway.
  BOOST_TEST((std::chrono::steady_clock::now() - started < 10s));
  BOOST_TEST(state_of(s, id) == "cancelled");
  auto message = s.text("SELECT last_error_message FROM jobs_live WHERE id = "
                        + std::to_string(id));
  // The handler saw the cancel: the sleep kind fails with "sleep cancelled:
  // <reason>", which the recorded cancel keeps.
  BOOST_TEST(contains(message, "cancelled on request (actor-worker jobs "
                               "cancel)"),
             message);
  BOOST_TEST(contains(message, "sleep cancelled: cancelled on request"),
             message);
  BOOST_TEST(s.check("SELECT finalized_at IS NOT NULL FROM jobs_live WHERE id = "
                     + std::to_string(id)));
  worker.signal(SIGTERM);
  BOOST_TEST((worker.wait_exit(30s) == std::optional<int>{0}));
}

BOOST_AUTO_TEST_CASE(a_cancel_whose_notify_was_missed_is_found_on_the_heartbeat) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  temp_file config{fast_worker_toml};
  background_process worker{{"run", "--config", config.path}, db.url};
  auto id = start_sleeping_job(db, worker, s);
  // The request alone, as if its NOTIFY had been lost in a reconnect.
  s.exec("INSERT INTO job_cancel_requests (job_id) VALUES ("
         + std::to_string(id) + ")");
  BOOST_TEST(aw::test::wait_until(
    [&] { return state_of(s, id) == "cancelled"; }, 20s),
             "stderr: " << worker.err());
  // Maintenance forgets the request once the job finished.
  BOOST_TEST(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM job_cancel_requests") == 0;
    },
    30s));
  worker.signal(SIGTERM);
  BOOST_TEST((worker.wait_exit(30s) == std::optional<int>{0}));
}

// -- jobs retry --------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(jobs_retry_runs_a_scheduled_job_now) {
  aw::test::fresh_database db;
  aw::insert_options later;
  later.delay = 1h;
  auto id = enqueue_one(db, "noop", {}, later);
  aw::test::db_session s{db.url};
  pqxx::connection listener{db.url};
  struct receiver : pqxx::notification_receiver {
    using pqxx::notification_receiver::notification_receiver;
    std::vector<std::string> payloads;
    void operator()(const std::string& payload, int) override {
      payloads.push_back(payload);
    }
  } recv{listener, "actor_worker_jobs"};
  listener.get_notifs();
  auto r = run_binary("jobs retry " + std::to_string(id), db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "is due now (was scheduled)"), r.out);
  BOOST_TEST(s.check("SELECT run_at <= now() FROM jobs_live WHERE id = "
                     + std::to_string(id)));
  // Its queue is woken, and a claim takes it.
  aw::test::wait_until(
    [&] {
      listener.await_notification(0, 100'000);
      return !recv.payloads.empty();
    },
    5s);
  BOOST_TEST(recv.payloads.size() >= 1u);
  BOOST_TEST(recv.payloads.front() == "default");
  auto store = make_store(db);
  auto claimed = store.claim("default", 10);
  BOOST_REQUIRE_EQUAL(claimed.jobs.size(), 1u);
  BOOST_TEST(claimed.jobs[0].id == id);
}

BOOST_AUTO_TEST_CASE(jobs_retry_runs_a_completed_or_cancelled_job_again) {
  aw::test::fresh_database db;
  auto done = enqueue_one(db, "noop", {{"x", 1}});
  auto cancelled = enqueue_one(db, "noop", {{"x", 2}});
  auto store = make_store(db);
  auto claimed = store.claim("default", 1);
  BOOST_REQUIRE_EQUAL(claimed.jobs.size(), 1u);
  BOOST_REQUIRE_EQUAL(claimed.jobs[0].id, done);
  store.finish({aw::test::outcome(claimed.jobs[0],
                                  aw::outcome_kind::completed)});
  aw::test::db_session s{db.url};
  BOOST_REQUIRE_EQUAL(state_of(s, done), "completed");
  BOOST_REQUIRE_EQUAL(run_binary("jobs cancel " + std::to_string(cancelled),
                                 db.url)
                        .exit_code,
                      0);
  for (auto id : {done, cancelled})
    BOOST_TEST_CONTEXT("job " << id) {
      auto r = run_binary("jobs retry --json " + std::to_string(id), db.url);
      BOOST_TEST(r.exit_code == 0, r.err);
      auto out = nlohmann::json::parse(r.out);
      BOOST_TEST(out["state"] == "available");
      BOOST_TEST(out["was"] == (id == done ? "completed" : "cancelled"));
      BOOST_TEST(state_of(s, id) == "available");
      BOOST_TEST(s.check("SELECT finalized_at IS NULL AND run_at <= now() "
                         "FROM jobs_live WHERE id = "
                         + std::to_string(id)));
    }
  // Both run again: a new attempt each.
  auto again = store.claim("default", 10);
  BOOST_REQUIRE_EQUAL(again.jobs.size(), 2u);
  for (auto& j : again.jobs)
    if (j.id == done)
      BOOST_TEST(j.attempt == 2);
  for (auto& j : again.jobs)
    store.finish({aw::test::outcome(j, aw::outcome_kind::completed)});
  BOOST_TEST(state_of(s, done) == "completed");
  BOOST_TEST(state_of(s, cancelled) == "completed");
}

BOOST_AUTO_TEST_CASE(jobs_retry_of_a_running_or_unknown_job_exits_1) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "noop");
  auto store = make_store(db);
  BOOST_REQUIRE_EQUAL(store.claim("default", 1).jobs.size(),
                      1u);
  auto r = run_binary("jobs retry " + std::to_string(id), db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "is running (on w1)"), r.err);
  r = run_binary("jobs retry 987654", db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "job 987654 not found"), r.err);
  auto [dead, original] = dead_letter(db, "gone");
  r = run_binary("jobs retry " + std::to_string(original), db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "dead letter " + std::to_string(dead)), r.err);
  BOOST_TEST(contains(r.err, "dlq retry"), r.err);
}

// -- dlq ---------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(dlq_show_prints_one_dead_letter_by_its_id) {
  aw::test::fresh_database db;
  auto [dead, original] = dead_letter(db, "gone");
  auto r = run_binary("dlq show --json " + std::to_string(dead), db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto row = nlohmann::json::parse(r.out);
  aw::test::db_session s{db.url};
  BOOST_TEST(keys_of(row) == s.columns_of("dead_letter_jobs"));
  BOOST_TEST(row["id"] == dead);
  BOOST_TEST(row["original_job_id"] == original);
  r = run_binary("dlq show 987654", db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "dead letter 987654 not found"), r.err);
}

BOOST_AUTO_TEST_CASE(dlq_retry_moves_a_dead_letter_back_keeping_its_fields) {
  aw::test::fresh_database db;
  auto [dead, original] = dead_letter(db, "gone");
  auto r = run_binary("dlq retry " + std::to_string(dead), db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_REQUIRE(std::regex_match(r.out, std::regex{"[0-9]+\n"}));
  auto id = std::stoll(r.out);
  BOOST_TEST(id != original);
  aw::test::db_session s{db.url};
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  BOOST_TEST(s.text("SELECT kind" + where) == "gone");
  BOOST_TEST(s.text("SELECT state" + where) == "available");
  BOOST_TEST(s.scalar("SELECT priority" + where) == -2);
  BOOST_TEST(s.scalar("SELECT max_attempts" + where) == 3);
  BOOST_TEST(s.scalar("SELECT attempt" + where) == 0);
  BOOST_TEST(s.scalar("SELECT error_count" + where) == 0);
  BOOST_TEST(s.check("SELECT args = '{\"n\": 7}'::jsonb" + where));
  BOOST_TEST(s.check("SELECT tags = '{red,blue}'" + where));
  BOOST_TEST(s.text("SELECT metadata->>'trace'" + where) == "t-1");
  BOOST_TEST(s.scalar("SELECT (metadata->'retried_from_dead_letter'->>"
                      "'dead_letter_id')::bigint"
                      + where)
             == dead);
  BOOST_TEST(s.scalar("SELECT (metadata->'retried_from_dead_letter'->>"
                      "'original_job_id')::bigint"
                      + where)
             == original);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  // Gone now: a second retry says so.
  r = run_binary("dlq retry " + std::to_string(dead), db.url);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "dead letter " + std::to_string(dead)
                               + " not found"),
             r.err);
}

BOOST_AUTO_TEST_CASE(dlq_retry_all_moves_the_matching_dead_letters_in_one_go) {
  aw::test::fresh_database db;
  auto a = dead_letter(db, "mail", "q1").first;
  auto b = dead_letter(db, "sms", "q1").first;
  auto c = dead_letter(db, "mail", "q2").first;
  auto d = dead_letter(db, "mail", "q1").first;
  auto r = run_binary("dlq retry --all --queue q1 --kind mail --json", db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto out = nlohmann::json::parse(r.out);
  BOOST_REQUIRE_EQUAL(out.size(), 2u);
  BOOST_TEST(out[0]["dead_letter_id"] == a);
  BOOST_TEST(out[1]["dead_letter_id"] == d);
  BOOST_TEST(keys_of(out[0])
             == (std::set<std::string>{"dead_letter_id", "original_job_id",
                                       "job_id", "kind", "queue"}));
  aw::test::db_session s{db.url};
  BOOST_TEST(state_of(s, out[0]["job_id"].get<int64_t>()) == "available");
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 2);
  // Without filters: the rest; the count on stdout.
  r = run_binary("dlq retry --all", db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(r.out == "2\n");
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE metadata ? "
                      "'retried_from_dead_letter'")
             == 4);
  (void) b;
  (void) c;
}

BOOST_AUTO_TEST_CASE(dlq_retry_without_id_or_all_exits_2) {
  aw::test::fresh_database db;
  for (auto args : {"dlq retry", "dlq retry 5 --all", "dlq retry 5 --queue q"})
    BOOST_TEST_CONTEXT(args) {
      auto r = run_binary(args, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, "dlq retry: "), r.err);
    }
}

BOOST_AUTO_TEST_CASE(dlq_purge_deletes_dead_letters_older_than_before) {
  aw::test::fresh_database db;
  dead_letter(db, "a", "q1");
  dead_letter(db, "b", "q1");
  dead_letter(db, "c", "q2");
  db.exec("UPDATE dead_letter_jobs SET failed_at = now() - interval '10 days' "
          "WHERE kind IN ('a', 'c')");
  auto r = run_binary("dlq purge --before 7d --queue q1", db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "1\n");
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE kind = 'a'")
             == 0);
  r = run_binary("dlq purge --json", db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(nlohmann::json::parse(r.out) == (nlohmann::json{{"purged", 2}}));
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  r = run_binary("dlq purge --before soon", db.url);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "--before"), r.err);
}

BOOST_AUTO_TEST_CASE(dead_letter_retention_deletes_old_dead_letters_in_batches) {
  aw::test::fresh_database db;
  for (int i = 0; i < 5; ++i)
    dead_letter(db, "old");
  dead_letter(db, "new");
  db.exec("UPDATE dead_letter_jobs SET failed_at = now() - interval '40 days' "
          "WHERE kind = 'old'");
  // Kept forever by default.
  auto keep = make_store(db);
  keep.delete_expired(100);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 6);
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  opts.completed_retention = 1h;
  opts.dead_letter_retention = std::chrono::hours{24 * 30};
  aw::storage::job_store store{opts};
  // Bounded: at most a batch per call, oldest first.
  BOOST_TEST(store.delete_expired(2) == 2);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 4);
  BOOST_TEST(store.delete_expired(100) == 3);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE kind = "
                       "'new'")
             == 1);
}

// -- enqueue -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(enqueue_run_at_tags_and_metadata_land_in_the_row) {
  aw::test::fresh_database db;
  auto r = run_binary("enqueue noop --run-at 2031-02-03T04:05:06.5+02:00 "
                      "--tags a,b --metadata '{\"who\": \"ops\"}'",
                      db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto where = " FROM jobs_live WHERE id = " + std::to_string(std::stoll(r.out));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.check("SELECT run_at = '2031-02-03 02:05:06.5+00'" + where));
  BOOST_TEST(s.text("SELECT state" + where) == "scheduled");
  BOOST_TEST(s.check("SELECT tags = '{a,b}'" + where));
  BOOST_TEST(s.check("SELECT metadata = '{\"who\": \"ops\"}'" + where));
}

BOOST_AUTO_TEST_CASE(enqueue_flag_errors_exit_2_and_insert_nothing) {
  aw::test::fresh_database db;
  struct bad {
    std::string args;
    std::string says;
  };
  for (const auto& c : std::vector<bad>{
         {"noop --run-at 2031-02-03T04:05:06Z --delay 5",
          "--run-at and --delay exclude each other"},
         {"noop --run-at tomorrow", "--run-at: 'tomorrow' is not an RFC 3339"},
         {"noop --run-at 2031-02-30T00:00:00Z", "no such day"},
         {"noop --run-at 2031-02-03T04:05:06", "no time zone"},
         {"noop --metadata '[1]'", "--metadata must be a JSON object, got array"},
         {"noop --metadata '{x'", "--metadata is not valid JSON"},
         {"noop --tags a,,b", "--tags: empty tag"},
         {"noop @/nonexistent/args.json", "cannot read '/nonexistent/args.json'"},
         {"", "KIND is required"}})
    BOOST_TEST_CONTEXT(c.args) {
      auto r = run_binary("enqueue " + c.args, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.says), r.err);
    }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(enqueue_reads_args_from_a_file_or_stdin) {
  aw::test::fresh_database db;
  // Larger than a command line may be (128 KiB per argument on Linux).
  std::string big(300'000, 'x');
  temp_file file{nlohmann::json{{"blob", big}}.dump(), ".json"};
  auto r = run_binary("enqueue noop @" + file.path, db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT length(args->>'blob') FROM jobs_live WHERE id = "
                      + r.out.substr(0, r.out.size() - 1))
             == 300'000);
  r = run_binary("enqueue noop - < " + file.path, db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(s.scalar("SELECT length(args->>'blob') FROM jobs_live WHERE id = "
                      + r.out.substr(0, r.out.size() - 1))
             == 300'000);
  temp_file broken{"{\"a\": ", ".json"};
  r = run_binary("enqueue noop @" + broken.path, db.url);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "ARGS_JSON (" + broken.path + ") for kind 'noop' "
                             "is not valid JSON"),
             r.err);
}

BOOST_AUTO_TEST_CASE(enqueue_jsonl_inserts_every_line_in_batches) {
  aw::test::fresh_database db;
  std::string lines;
  for (int i = 0; i < 2500; ++i)
    lines += nlohmann::json{{"kind", "noop"}, {"args", {{"i", i}}}}.dump()
             + "\n";
  lines += "\n"; // blank lines are skipped
  lines += R"({"kind": "mail", "args": {"to": "a@b"}, "queue": "q", "priority": -1, )"
           R"("max_attempts": 4, "run_at": "2031-01-01T00:00:00Z", "tags": ["x"], )"
           R"("metadata": {"m": 1}})"
           "\n";
  temp_file file{lines, ".jsonl"};
  auto r = run_binary("enqueue --jsonl " + file.path, db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "2501\n");
  BOOST_TEST(contains(r.err, "enqueued 2501 job(s)"), r.err);
  // No terminal: no progress bar.
  BOOST_TEST(!contains(r.err, "["), r.err);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'noop'") == 2500);
  BOOST_TEST(s.scalar("SELECT count(DISTINCT args->>'i') FROM jobs_live") == 2500);
  auto where = std::string{" FROM jobs_live WHERE kind = 'mail'"};
  BOOST_TEST(s.text("SELECT queue" + where) == "q");
  BOOST_TEST(s.scalar("SELECT priority" + where) == -1);
  BOOST_TEST(s.scalar("SELECT max_attempts" + where) == 4);
  BOOST_TEST(s.check("SELECT run_at = '2031-01-01 00:00:00+00'" + where));
  BOOST_TEST(s.check("SELECT tags = '{x}' AND metadata = '{\"m\": 1}'" + where));
  // From stdin, with the flags as defaults for the lines.
  r = run_binary("enqueue --jsonl - --queue bulk < " + file.path, db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE queue = 'bulk'")
             == 2500);
}

BOOST_AUTO_TEST_CASE(enqueue_jsonl_copies_plain_jobs_and_prints_nothing_it_did_not_insert) {
  aw::test::fresh_database db;
  std::string lines;
  for (int i = 0; i < 1500; ++i)
    lines += nlohmann::json{{"kind", "noop"}, {"args", {{"i", i}}}}.dump() + "\n";
  lines += R"({"kind": "mail", "tags": ["x"]})" "\n"; // an option: not copied
  temp_file file{lines, ".jsonl"};
  auto r = run_binary("enqueue --jsonl " + file.path, db.url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "1501\n");
  aw::test::db_session s{db.url};
  // Batches of 1,000 plain jobs go by COPY (ids taken first, in order).
  BOOST_TEST(s.scalar("SELECT count(DISTINCT args->>'i') FROM jobs_live "
                      "WHERE kind = 'noop'") == 1500);
  BOOST_TEST(s.check("SELECT bool_and((args->>'i')::int < (args->>'i')::int + 1) "
                     "AND count(*) = 1500 FROM jobs WHERE kind = 'noop'"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'mail'") == 1);
  // --packed (the packs of 0.1's pre-releases) is gone.
  r = run_binary("enqueue --jsonl " + file.path + " --packed", db.url);
  BOOST_TEST(r.exit_code == 2);
}

BOOST_AUTO_TEST_CASE(enqueue_jsonl_with_a_bad_line_names_it_and_inserts_nothing) {
  aw::test::fresh_database db;
  struct bad {
    std::string line;
    std::string says;
  };
  for (const auto& c : std::vector<bad>{
         {"{\"kind\": \"noop\", \"args\": [1]}",
          "line 3: \"args\" must be a JSON object, got array"},
         {"{\"args\": {}}", "line 3: no \"kind\""},
         {"{\"kind\": \"noop\", \"colour\": 1}", "line 3: unknown key \"colour\""},
         {"not json", "line 3: not valid JSON"},
         {"{\"kind\": \"noop\", \"run_at\": \"soon\"}", "line 3: \"run_at\""},
         {"{\"kind\": \"\"}", "line 3: "}})
    BOOST_TEST_CONTEXT(c.line) {
      temp_file file{"{\"kind\": \"noop\"}\n{\"kind\": \"noop\"}\n" + c.line
                       + "\n{\"kind\": \"noop\"}\n",
                     ".jsonl"};
      auto r = run_binary("enqueue --jsonl " + file.path, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.says), r.err);
      BOOST_TEST(r.out.empty());
    }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
  auto r = run_binary("enqueue noop --jsonl /dev/null", db.url);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "give no KIND"), r.err);
}

// -- rough edges (issue 10) --------------------------------------------------------

BOOST_AUTO_TEST_CASE(invalid_utf8_in_an_argument_exits_2_naming_the_argument) {
  aw::test::fresh_database db;
  struct bad {
    std::string args;
    std::string says;
  };
  // (the test's shell is sh: printf makes the bytes)
  for (const auto& c : std::vector<bad>{
         {"enqueue \"$(printf 'k\\377')\"", "KIND"},
         {"enqueue noop \"$(printf '{\"a\": \"\\377\"}')\"", "ARGS_JSON"},
         {"enqueue noop --queue \"$(printf 'q\\300\\200')\"", "--queue"},
         {"jobs list --kind \"$(printf '\\355\\240\\200')\"", "--kind"}})
    BOOST_TEST_CONTEXT(c.args) {
      auto r = run_binary(c.args, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.says + " "), r.err);
      BOOST_TEST(contains(r.err, "is not valid UTF-8"), r.err);
    }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
  // Valid multi-byte text is fine.
  auto r = run_binary("enqueue 'grüße' '{\"s\": \"日本\"}'", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
}

BOOST_AUTO_TEST_CASE(a_duplicate_unique_enqueue_prints_the_existing_id_with_a_hint) {
  aw::test::fresh_database db;
  auto first = run_binary("enqueue noop '{\"a\": 1}' --unique", db.url);
  BOOST_REQUIRE_EQUAL(first.exit_code, 0);
  BOOST_TEST(!contains(first.err, "already exists"), first.err);
  auto again = run_binary("enqueue noop '{\"a\": 1}' --unique", db.url);
  BOOST_TEST(again.exit_code == 0);
  BOOST_TEST(again.out == first.out);
  auto id = first.out.substr(0, first.out.size() - 1);
  BOOST_TEST(contains(again.err, "already exists: job " + id + " (available)"),
             again.err);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 1);
}

BOOST_AUTO_TEST_CASE(a_command_group_names_its_commands_when_one_is_unknown_or_missing) {
  aw::test::fresh_database db;
  struct usage {
    std::string args;
    std::string says;
  };
  for (const auto& c : std::vector<usage>{
         {"jobs frob", "unknown command 'frob' for 'jobs' (commands: list, "
                       "show, cancel, retry)"},
         {"dlq frob", "unknown command 'frob' for 'dlq' (commands: list, show, "
                      "retry, purge)"},
         {"callback frob", "unknown command 'frob' for 'callback' (commands: "
                           "complete, fail, retry, resume)"},
         {"jobs", "'jobs' needs a command (commands: list, show, cancel, "
                  "retry)"},
         {"dlq --json", "'dlq' needs a command"}})
    BOOST_TEST_CONTEXT(c.args) {
      auto r = run_binary(c.args, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.says), r.err);
    }
}

BOOST_AUTO_TEST_CASE(every_commands_help_shows_the_global_options) {
  aw::test::fresh_database db;
  for (auto cmd : {"jobs list", "jobs cancel", "jobs retry", "dlq show",
                   "dlq retry", "dlq purge", "enqueue", "run", "jobs"})
    BOOST_TEST_CONTEXT(cmd) {
      auto r = run_binary(std::string{cmd} + " --help", db.url);
      BOOST_TEST(r.exit_code == 0);
      for (auto opt : {"--config", "--database-url", "--log-level"})
        BOOST_TEST(contains(r.out, opt), r.out);
    }
}

BOOST_AUTO_TEST_SUITE_END()
