// aw::enqueue / aw::enqueue_many against a real database: transactional
// visibility, option columns, bulk inserts, the NOTIFY trigger and input
// validation.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"

using namespace std::chrono_literals;
using aw::test::contains;

namespace {

constexpr const char* job_channel = "actor_worker_jobs";

/// Collects NOTIFYs on the job channel from a connection of its own. To
/// know that everything a session sent has arrived, the test sends a
/// sentinel from the same session afterwards: PostgreSQL delivers one
/// session's notifications in commit order.
class notify_collector : public pqxx::notification_receiver {
public:
  explicit notify_collector(pqxx::connection_base& conn)
    : pqxx::notification_receiver(conn, job_channel) {
  }

  void operator()(const std::string& payload, int) override {
    payloads.push_back(payload);
  }

  /// Waits for `sentinel`; returns every payload received before it.
  std::vector<std::string> until(const std::string& sentinel,
                                 std::chrono::seconds timeout = 30s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (size_t i = 0; i < payloads.size(); ++i)
        if (payloads[i] == sentinel) {
          std::vector<std::string> before(payloads.begin(),
                                          payloads.begin() + i);
          payloads.erase(payloads.begin(), payloads.begin() + i + 1);
          return before;
        }
      if (std::chrono::steady_clock::now() >= deadline)
        throw std::runtime_error("no sentinel notification '" + sentinel
                                 + "' within the timeout");
      conn().await_notification(0, 200'000);
    }
  }

  std::vector<std::string> payloads;
};

/// Sends the sentinel NOTIFY in a transaction of its own on `conn`.
void send_sentinel(pqxx::connection_base& conn, const std::string& sentinel) {
  pqxx::work tx{conn};
  tx.exec_params("SELECT pg_notify($1, $2)", job_channel, sentinel);
  tx.commit();
}

/// A listening connection whose LISTEN is in effect before it returns.
struct listening {
  explicit listening(const std::string& url) : conn(url), collector(conn) {
    // notification_receiver issues LISTEN lazily; make it take effect.
    conn.get_notifs();
  }
  pqxx::connection conn;
  notify_collector collector;
};

} // namespace

BOOST_AUTO_TEST_SUITE(enqueue_test)

BOOST_AUTO_TEST_CASE(committed_enqueue_is_visible_only_after_commit) {
  aw::test::fresh_database db;
  aw::test::db_session other{db.url};
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, "noop", {{"x", 1}});
  BOOST_TEST(id > 0);
  // Another session does not see the uncommitted row...
  BOOST_TEST(other.scalar("SELECT count(*) FROM jobs_live") == 0);
  tx.commit();
  // ...and sees it once committed, with its args.
  BOOST_TEST(other.scalar("SELECT count(*) FROM jobs_live WHERE id = "
                          + std::to_string(id) + " AND kind = 'noop' "
                          "AND args = '{\"x\": 1}'::jsonb")
             == 1);
}

BOOST_AUTO_TEST_CASE(rolled_back_enqueue_leaves_no_job) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  {
    pqxx::work tx{*conn};
    aw::enqueue(tx, "noop", {});
    aw::enqueue_many(tx, {{"noop", {}, {}}, {"noop", {}, {}}});
    tx.abort();
  }
  {
    // A transaction destroyed without commit rolls back too.
    pqxx::work tx{*conn};
    aw::enqueue(tx, "noop", {});
  }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(default_options_fill_the_column_defaults) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, "noop", {});
  tx.commit();
  aw::test::db_session s{db.url};
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  BOOST_TEST(s.text("SELECT queue" + where) == "default");
  BOOST_TEST(s.text("SELECT state" + where) == "available");
  BOOST_TEST(s.scalar("SELECT priority" + where) == 0);
  BOOST_TEST(s.check("SELECT max_attempts IS NULL" + where));
  BOOST_TEST(s.check("SELECT run_at <= now()" + where));
  BOOST_TEST(s.check("SELECT metadata = '{}'::jsonb" + where));
  BOOST_TEST(s.check("SELECT tags = '{}'::text[]" + where));
  // `{}` in C++ braces is JSON null: stored as an empty object.
  BOOST_TEST(s.check("SELECT args = '{}'::jsonb" + where));
  BOOST_TEST(s.scalar("SELECT attempt" + where) == 0);
  BOOST_TEST(s.scalar("SELECT error_count" + where) == 0);
  BOOST_TEST(s.check("SELECT locked_by IS NULL" + where));
}

BOOST_AUTO_TEST_CASE(options_land_in_their_columns) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  aw::insert_options opts;
  opts.queue = "mail";
  opts.priority = -7;
  opts.max_attempts = 3;
  opts.metadata = {{"tenant", "acme"}, {"trace", {{"id", 42}}}};
  opts.tags = {"billing", "urgent"};
  auto id = aw::enqueue(tx, "send_email", {{"to", "a@b.c"}}, opts);
  tx.commit();
  aw::test::db_session s{db.url};
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  BOOST_TEST(s.text("SELECT kind" + where) == "send_email");
  BOOST_TEST(s.text("SELECT queue" + where) == "mail");
  BOOST_TEST(s.scalar("SELECT priority" + where) == -7);
  BOOST_TEST(s.scalar("SELECT max_attempts" + where) == 3);
  BOOST_TEST(s.text("SELECT state" + where) == "available");
  BOOST_TEST(s.check("SELECT args = '{\"to\": \"a@b.c\"}'::jsonb" + where));
  BOOST_TEST(s.check("SELECT metadata = '{\"tenant\": \"acme\", "
                     "\"trace\": {\"id\": 42}}'::jsonb"
                     + where));
  BOOST_TEST(s.check("SELECT tags = ARRAY['billing', 'urgent']::text[]" + where));
}

BOOST_AUTO_TEST_CASE(delay_schedules_the_job_that_far_in_the_future) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  aw::insert_options opts;
  opts.delay = 1h;
  auto id = aw::enqueue(tx, "noop", {}, opts);
  tx.commit();
  aw::test::db_session s{db.url};
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  BOOST_TEST(s.text("SELECT state" + where) == "scheduled");
  BOOST_TEST(s.check("SELECT run_at > now()" + where));
  // created_at and run_at both come from the inserting transaction's now().
  BOOST_TEST(s.check("SELECT run_at - created_at = interval '1 hour'" + where));
}

BOOST_AUTO_TEST_CASE(explicit_run_at_is_stored_exactly_and_wins_over_delay) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  // 2030-01-02T03:04:05.123456Z
  std::chrono::system_clock::time_point future{
    std::chrono::microseconds{1893553445123456}};
  aw::insert_options later;
  later.run_at = future;
  later.delay = 5s; // ignored: run_at wins
  auto future_id = aw::enqueue(tx, "noop", {}, later);
  aw::insert_options past;
  past.run_at = std::chrono::system_clock::now() - 10min;
  auto past_id = aw::enqueue(tx, "noop", {}, past);
  tx.commit();
  aw::test::db_session s{db.url};
  auto where = [](int64_t id) { return " FROM jobs_live WHERE id = " + std::to_string(id); };
  BOOST_TEST(s.check("SELECT run_at = '2030-01-02 03:04:05.123456+00'::timestamptz"
                     + where(future_id)));
  BOOST_TEST(s.text("SELECT state" + where(future_id)) == "scheduled");
  // A run_at in the past is due at once.
  BOOST_TEST(s.text("SELECT state" + where(past_id)) == "available");
  BOOST_TEST(s.check("SELECT run_at < now() - interval '9 minutes'" + where(past_id)));
}

BOOST_AUTO_TEST_CASE(enqueue_many_inserts_in_one_statement_and_returns_ids_in_request_order) {
  aw::test::fresh_database db;
  // Count INSERT statements on jobs with a statement-level trigger.
  db.exec("CREATE TABLE insert_statements (n integer NOT NULL);"
          "INSERT INTO insert_statements VALUES (0);"
          "CREATE FUNCTION count_insert_statement() RETURNS trigger "
          "LANGUAGE plpgsql AS $$ BEGIN "
          "UPDATE insert_statements SET n = n + 1; RETURN NULL; END $$;"
          "CREATE TRIGGER count_inserts AFTER INSERT ON jobs_in "
          "FOR EACH STATEMENT EXECUTE FUNCTION count_insert_statement();");
  std::vector<aw::enqueue_request> requests;
  const int n = 500;
  for (int i = 0; i < n; ++i) {
    aw::enqueue_request r;
    r.kind = "kind_" + std::to_string(i);
    r.args = {{"i", i}};
    // Mixed queues and priorities (reversed), so the ids cannot line up
    // with the requests by accident of any ordering but the request order.
    r.options.queue = (i % 3 == 0) ? "a" : "b";
    r.options.priority = n - i;
    requests.push_back(std::move(r));
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  BOOST_TEST(db.scalar("SELECT n FROM insert_statements") == 1);
  BOOST_REQUIRE_EQUAL(ids.size(), static_cast<size_t>(n));
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == n);
  aw::test::db_session s{db.url};
  auto rows = s.query("SELECT id, kind, (args->>'i')::int, queue, priority FROM jobs_live");
  std::map<int64_t, int> index_of_id;
  for (const auto& row : rows) {
    auto i = row[2].as<int>();
    index_of_id[row[0].as<int64_t>()] = i;
    BOOST_TEST(row[1].as<std::string>() == "kind_" + std::to_string(i));
    BOOST_TEST(row[3].as<std::string>() == ((i % 3 == 0) ? "a" : "b"));
    BOOST_TEST(row[4].as<int>() == n - i);
  }
  for (int i = 0; i < n; ++i)
    BOOST_TEST(index_of_id.at(ids[static_cast<size_t>(i)]) == i);
  // Nothing to insert: no statement at all.
  pqxx::work tx2{*conn};
  BOOST_TEST(aw::enqueue_many(tx2, {}).empty());
  tx2.commit();
  BOOST_TEST(db.scalar("SELECT n FROM insert_statements") == 1);
}

BOOST_AUTO_TEST_CASE(enqueue_many_mixes_plain_and_optioned_jobs_keeping_args_and_order) {
  // Plain jobs travel as column arrays, others as a JSON document: args
  // that need escaping in either arrive intact, and ids follow the requests.
  aw::test::fresh_database db;
  std::vector<aw::enqueue_request> requests;
  const std::vector<nlohmann::json> tricky = {
    {{"quote", "say \"hi\""}, {"backslash", "C:\\dir\\"}},
    {{"braces", "{a,b}"}, {"comma", "x,y"}, {"nul_free_unicode", "\u00e9\u4e2d\U0001F600"}},
    {{"list", nlohmann::json::array({1, "two", nullptr, {{"three", 3}}})}},
    nullptr,
  };
  for (int i = 0; i < 40; ++i) {
    aw::enqueue_request r;
    r.kind = "k";
    r.args = tricky[static_cast<size_t>(i) % tricky.size()];
    if (i % 5 == 1)
      r.options.tags = {"t"};
    if (i % 5 == 2)
      r.options.delay = std::chrono::hours(1);
    if (i % 5 == 3)
      r.options.metadata = {{"m", i}};
    requests.push_back(std::move(r));
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  BOOST_REQUIRE_EQUAL(ids.size(), requests.size());
  aw::test::db_session s{db.url};
  for (size_t i = 0; i < requests.size(); ++i) {
    auto id = std::to_string(ids[i]);
    auto stored = nlohmann::json::parse(s.text("SELECT args::text FROM jobs_live WHERE id = " + id));
    auto expected = requests[i].args.is_null() ? nlohmann::json::object() : requests[i].args;
    BOOST_TEST(stored == expected, "job " << i << ": " << stored.dump());
    BOOST_TEST(s.text("SELECT state FROM jobs_live WHERE id = " + id)
               == (i % 5 == 2 ? "scheduled" : "available"));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE 't' = ANY (tags)") == 8);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE metadata ? 'm'") == 8);
}

BOOST_AUTO_TEST_CASE(a_due_job_sends_one_notification_with_the_queue_name) {
  aw::test::fresh_database db;
  listening listener{db.url};
  auto conn = db.connect();
  pqxx::work tx{*conn};
  aw::insert_options opts;
  opts.queue = "mail";
  aw::enqueue(tx, "noop", {}, opts);
  tx.commit();
  send_sentinel(*conn, "sentinel");
  auto got = listener.collector.until("sentinel");
  BOOST_TEST(got == std::vector<std::string>{"mail"});
}

BOOST_AUTO_TEST_CASE(bulk_insert_of_1000_jobs_sends_exactly_one_notification) {
  aw::test::fresh_database db;
  listening listener{db.url};
  std::vector<aw::enqueue_request> requests(1000);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].kind = "noop";
    requests[i].args = {{"i", i}};
    requests[i].options.queue = "bulk";
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  BOOST_TEST(aw::enqueue_many(tx, requests).size() == 1000u);
  tx.commit();
  send_sentinel(*conn, "sentinel");
  auto got = listener.collector.until("sentinel");
  BOOST_TEST(got == std::vector<std::string>{"bulk"});
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 1000);
}

BOOST_AUTO_TEST_CASE(bulk_insert_sends_one_notification_per_queue) {
  aw::test::fresh_database db;
  listening listener{db.url};
  std::vector<aw::enqueue_request> requests;
  for (int i = 0; i < 300; ++i) {
    aw::enqueue_request r;
    r.kind = "noop";
    r.options.queue = (i % 3 == 0) ? "q1" : (i % 3 == 1) ? "q2" : "q3";
    requests.push_back(std::move(r));
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  aw::enqueue_many(tx, requests);
  tx.commit();
  send_sentinel(*conn, "sentinel");
  auto got = listener.collector.until("sentinel");
  std::sort(got.begin(), got.end());
  BOOST_TEST(got == (std::vector<std::string>{"q1", "q2", "q3"}));
}

BOOST_AUTO_TEST_CASE(rolled_back_or_scheduled_enqueue_sends_no_notification) {
  aw::test::fresh_database db;
  listening listener{db.url};
  auto conn = db.connect();
  {
    pqxx::work tx{*conn};
    aw::enqueue(tx, "noop", {});
    tx.abort();
  }
  {
    // Not due yet: nothing to wake anyone for.
    pqxx::work tx{*conn};
    aw::insert_options opts;
    opts.delay = 1h;
    aw::enqueue(tx, "noop", {}, opts);
    tx.commit();
  }
  send_sentinel(*conn, "sentinel");
  auto got = listener.collector.until("sentinel");
  BOOST_TEST(got.empty());
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 1);
}

BOOST_AUTO_TEST_CASE(invalid_input_throws_invalid_argument_naming_the_problem) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto names = [](const std::string& what) {
    return [what](const std::invalid_argument& e) {
      BOOST_TEST_MESSAGE("message: " << e.what());
      return contains(e.what(), what);
    };
  };
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "", {}), std::invalid_argument,
                        names("kind must not be empty"));
  aw::insert_options zero;
  zero.max_attempts = 0;
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", {}, zero),
                        std::invalid_argument, names("max_attempts"));
  aw::insert_options array_meta;
  array_meta.metadata = nlohmann::json::array({1, 2});
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", {}, array_meta),
                        std::invalid_argument, names("metadata"));
  aw::insert_options no_queue;
  no_queue.queue = "";
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", {}, no_queue),
                        std::invalid_argument, names("queue"));
  // Args are a JSON object (or nothing): anything else would only fail
  // later, in the handler.
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", nlohmann::json::array({1, 2})),
                        std::invalid_argument, names("must be a JSON object, got array"));
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", 42), std::invalid_argument,
                        names("must be a JSON object, got number"));
  // Names that would forge log lines or flood a table are refused.
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop\n[error] forged", {}),
                        std::invalid_argument,
                        names("kind contains a control character"));
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, std::string(201, 'k'), {}),
                        std::invalid_argument, names("more than the 200 allowed"));
  aw::insert_options escape_queue;
  escape_queue.queue = "mail\x1b[31m";
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", {}, escape_queue),
                        std::invalid_argument,
                        names("queue of kind 'noop' contains a control character"));
  // Durations past 36,500 days would overflow timers and deadlines.
  aw::insert_options far_deadline;
  far_deadline.deadline = std::chrono::hours{24 * 116000};
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", {}, far_deadline),
                        std::invalid_argument, names("deadline"));
  aw::insert_options far_delay;
  far_delay.delay = std::chrono::hours{24 * 36501};
  BOOST_CHECK_EXCEPTION(aw::enqueue(tx, "noop", {}, far_delay),
                        std::invalid_argument, names("delay"));
  // One bad request fails the whole batch before anything is inserted.
  std::vector<aw::enqueue_request> batch{{"noop", {}, {}}, {"", {}, {}}};
  BOOST_CHECK_EXCEPTION(aw::enqueue_many(tx, batch), std::invalid_argument,
                        names("kind must not be empty"));
  // Validation runs before any SQL: the transaction is still usable.
  aw::enqueue(tx, "noop", {});
  tx.commit();
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 1);
}

BOOST_AUTO_TEST_SUITE_END()
