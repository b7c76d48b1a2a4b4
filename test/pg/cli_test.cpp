// The actor-worker binary itself against a real database: enqueue, jobs
// show, dlq list, config errors, and the run command's start and shutdown.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "cli_process.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "refusing_port.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;
using aw::test::contains;
using aw::test::background_process;
using aw::test::run_bounded;
using aw::test::temp_file;
using aw::test::temp_path;
using aw::test::slurp;

namespace {

int64_t enqueue_one(const aw::test::fresh_database& db, const std::string& kind,
                    const nlohmann::json& args,
                    const aw::insert_options& opts = {}) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, kind, args, opts);
  tx.commit();
  return id;
}

std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (auto& [key, value] : object.items())
    keys.insert(key);
  return keys;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_test)

BOOST_AUTO_TEST_CASE(enqueue_prints_only_the_new_id) {
  aw::test::fresh_database db;
  auto r = aw::test::run_binary(R"(enqueue noop '{"a": 1}')", db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 0);
  BOOST_REQUIRE(std::regex_match(r.out, std::regex{"[0-9]+\n"}));
  auto id = std::stoll(r.out);
  auto where = " FROM jobs_live WHERE id = " + std::to_string(id);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT kind" + where) == "noop");
  BOOST_TEST(s.check("SELECT args = '{\"a\": 1}'::jsonb" + where));
  BOOST_TEST(s.text("SELECT state" + where) == "available");
  BOOST_TEST(s.text("SELECT queue" + where) == "default");
}

BOOST_AUTO_TEST_CASE(enqueue_options_land_in_the_row) {
  aw::test::fresh_database db;
  auto r = aw::test::run_binary(R"(enqueue sleep '{"ms": 1}' --queue mail )"
                                R"(--priority -3 --max-attempts 5 --delay 60)",
                                db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto where = " FROM jobs_live WHERE id = " + std::to_string(std::stoll(r.out));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT queue" + where) == "mail");
  BOOST_TEST(s.scalar("SELECT priority" + where) == -3);
  BOOST_TEST(s.scalar("SELECT max_attempts" + where) == 5);
  BOOST_TEST(s.text("SELECT state" + where) == "scheduled");
  BOOST_TEST(s.check("SELECT run_at - created_at = interval '60 seconds'" + where));
  // A duration with a unit works as well.
  auto r2 = aw::test::run_binary("enqueue noop --delay 2m", db.url);
  BOOST_REQUIRE_EQUAL(r2.exit_code, 0);
  auto where2 = " FROM jobs_live WHERE id = " + std::to_string(std::stoll(r2.out));
  BOOST_TEST(s.check("SELECT run_at - created_at = interval '2 minutes'" + where2));
  BOOST_TEST(s.check("SELECT args = '{}'::jsonb" + where2));
}

BOOST_AUTO_TEST_CASE(enqueue_with_invalid_args_json_exits_2_with_a_message) {
  aw::test::fresh_database db;
  auto r = aw::test::run_binary("enqueue noop '{bad'", db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(contains(r.err, "ARGS_JSON for kind 'noop' is not valid JSON"));
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(job_input_the_queue_would_trip_over_is_refused_with_exit_2) {
  aw::test::fresh_database db;
  struct bad {
    std::string args;
    std::string says;
  };
  for (const auto& c : std::vector<bad>{
         {"noop '[1,2]'", "args of kind 'noop' must be a JSON object, got array"},
         {"noop 42", "must be a JSON object, got number"},
         {"--deadline 116000d noop '{}'", "longer than the maximum of 36500d"},
         {"--delay 1.5.5s noop '{}'", "more than one decimal point"},
         // (the test's shell is sh: printf makes the newline)
         {"\"$(printf 'bad\\nkind')\" '{}'", "kind contains a control character"}})
    BOOST_TEST_CONTEXT(c.args) {
      auto r = aw::test::run_binary("enqueue " + c.args, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.says), r.err);
    }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_CASE(a_run_at_a_time_point_cannot_hold_is_refused_not_wrapped) {
  aw::test::fresh_database db;
  // One second past what 64-bit nanoseconds hold: it used to wrap to 1677
  // (and run at once), the earliest one to 2262.
  for (const auto* when : {"2262-04-11T23:47:16Z", "2262-04-11T23:47:17Z",
                           "9999-12-31T23:59:59Z", "1677-09-21T00:12:44Z",
                           "0001-01-01T00:00:00Z"})
    BOOST_TEST_CONTEXT(when) {
      auto r = aw::test::run_binary(std::string{"enqueue noop '{}' --run-at "}
                                      + when,
                                    db.url);
      BOOST_TEST(r.exit_code == 2, r.err);
      BOOST_TEST(contains(r.err, "--run-at: '" + std::string{when}
                                   + "' is out of range"),
                 r.err);
      temp_file lines{std::string{"{\"kind\": \"noop\"}\n{\"kind\": \"noop\", "
                                  "\"run_at\": \""}
                        + when + "\"}\n",
                      ".jsonl"};
      r = aw::test::run_binary("enqueue --jsonl " + lines.path, db.url);
      BOOST_TEST(r.exit_code == 2, r.err);
      BOOST_TEST(contains(r.err, "line 2: \"run_at\": '" + std::string{when}
                                   + "' is out of range"),
                 r.err);
    }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 0);
  // The bounds themselves are stored exactly.
  auto r = aw::test::run_binary("enqueue noop '{}' --run-at 2262-04-11T23:47:15Z",
                                db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  temp_file early{"{\"kind\": \"noop\", \"run_at\": \"1677-09-21T00:12:45Z\"}\n",
                  ".jsonl"};
  BOOST_REQUIRE_EQUAL(aw::test::run_binary("enqueue --jsonl " + early.path,
                                           db.url)
                        .exit_code,
                      0);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE run_at = "
                      "'2262-04-11 23:47:15+00'") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE run_at = "
                      "'1677-09-21 00:12:45+00'") == 1);
}

BOOST_AUTO_TEST_CASE(json_nested_deeper_than_256_is_refused_with_exit_2_in_every_form) {
  aw::test::fresh_database db;
  // An object whose one value is an array nested `levels` deep.
  auto nested = [](size_t levels) {
    return "{\"a\": " + std::string(levels - 1, '[') + std::string(levels - 1, ']')
           + "}";
  };
  auto deep = nested(100'000);
  const std::string says = "nests arrays and objects more than 256 deep";
  // The argument itself (an argument holds at most 128 KiB).
  auto r = aw::test::run_bounded({"enqueue", "noop", nested(60'000)}, db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "ARGS_JSON for kind 'noop' " + says), r.err);
  temp_file file{deep, ".json"};
  r = aw::test::run_binary("enqueue noop @" + file.path, db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, says), r.err);
  r = aw::test::run_binary("enqueue noop - < " + file.path, db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "ARGS_JSON (stdin) for kind 'noop' " + says), r.err);
  temp_file lines{"{\"kind\": \"noop\"}\n{\"kind\": \"noop\", \"args\": " + deep
                    + "}\n",
                  ".jsonl"};
  r = aw::test::run_binary("enqueue --jsonl " + lines.path, db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "line 2 " + says), r.err);
  r = aw::test::run_binary("enqueue --jsonl - < " + lines.path, db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  r = aw::test::run_bounded({"enqueue", "noop", "--metadata", nested(60'000)},
                            db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "--metadata " + says), r.err);
  r = aw::test::run_bounded({"callback", "complete",
                             "0b5e5c3e-6f1a-4c1e-9d7e-2a3b4c5d6e7f",
                             nested(60'000)},
                            db.url);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "PAYLOAD_JSON " + says), r.err);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 0);
  // 256 levels are taken, brackets inside strings do not count.
  temp_file ok{nested(256), ".json"};
  r = aw::test::run_binary("enqueue noop @" + ok.path, db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  r = aw::test::run_bounded({"enqueue", "noop", "{\"s\": \"" + std::string(300, '[')
                                                  + "\\\"{{\"}"},
                            db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 2);
}

BOOST_AUTO_TEST_CASE(enqueue_refuses_null_args_an_empty_ordering_key_and_nul_characters) {
  aw::test::fresh_database db;
  struct bad {
    std::string args;
    std::string says;
  };
  temp_file nul_line{"{\"kind\": \"noop\", \"args\": {\"a\": [\"x\\u0000y\"]}}\n",
                     ".jsonl"};
  for (const auto& c : std::vector<bad>{
         {"noop null", "ARGS_JSON for kind 'noop' must be a JSON object, got null"},
         {"noop '{}' --ordering-key ''",
          "--ordering-key: the key must not be empty"},
         {"noop '{\"a\": \"x\\u0000y\"}'",
          "ARGS_JSON for kind 'noop' holds a NUL character (\\u0000)"},
         {"noop '{\"a\\u0000\": 1}'", "holds a NUL character"},
         {"noop --metadata '{\"m\": \"\\u0000\"}'",
          "--metadata holds a NUL character"},
         {"--jsonl " + nul_line.path, "line 1 holds a NUL character"}})
    BOOST_TEST_CONTEXT(c.args) {
      auto r = aw::test::run_binary("enqueue " + c.args, db.url);
      BOOST_TEST(r.exit_code == 2, r.err);
      BOOST_TEST(contains(r.err, c.says), r.err);
    }
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 0);
  // Without the flag a job has no key; a real key is stored.
  auto r = aw::test::run_binary("enqueue noop '{}' --ordering-key k1", db.url);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs WHERE ordering_key = 'k1'") == 1);
}

BOOST_AUTO_TEST_CASE(enqueue_of_a_kind_no_live_worker_runs_warns_and_exits_0) {
  aw::test::fresh_database db;
  const std::string says = "warning: no live worker runs kind 'bogus_kind' in "
                           "queue 'default'";
  auto r = aw::test::run_binary("enqueue bogus_kind", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(std::regex_match(r.out, std::regex{"[0-9]+\n"}), r.out);
  BOOST_TEST(contains(r.err, says), r.err);
  // A live node that runs it, but another queue; a gone one; one long
  // unseen: still nobody.
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds) VALUES ('a:1', 'a', 'h', 1, 'v', '{mail}', "
          "'{bogus_kind}')");
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds, left_at) VALUES ('b:1', 'b', 'h', 1, 'v', "
          "'{default}', '{bogus_kind}', now())");
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds, last_seen_at) VALUES ('c:1', 'c', 'h', 1, 'v', "
          "'{default}', '{bogus_kind}', now() - interval '1 day')");
  r = aw::test::run_binary("enqueue bogus_kind", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.err, says), r.err);
  // --jsonl: once per kind and queue nobody runs.
  temp_file lines{"{\"kind\": \"bogus_kind\"}\n{\"kind\": \"bogus_kind\"}\n"
                  "{\"kind\": \"noop\", \"queue\": \"mail\"}\n",
                  ".jsonl"};
  r = aw::test::run_binary("enqueue --jsonl " + lines.path, db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.err, says), r.err);
  BOOST_TEST(r.err.find(says) == r.err.rfind(says), r.err);
  BOOST_TEST(contains(r.err, "runs kind 'noop' in queue 'mail'"), r.err);
  // A live node that runs it there: no warning; nor one that runs every
  // kind (kinds NULL).
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds) VALUES ('d:1', 'd', 'h', 1, 'v', '{default}', "
          "'{bogus_kind}')");
  r = aw::test::run_binary("enqueue bogus_kind", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(!contains(r.err, "warning"), r.err);
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues) VALUES ('e:1', 'e', 'h', 1, 'v', '{mail}')");
  r = aw::test::run_binary("enqueue other_kind --queue mail", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(!contains(r.err, "warning"), r.err);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 7);
}

BOOST_AUTO_TEST_CASE(a_url_the_server_refuses_for_good_exits_2_and_never_shows_the_password) {
  aw::test::fresh_database db;
  auto base = db.url.substr(0, db.url.rfind('/'));
  // An unknown database or role: a configuration error, not "unreachable".
  auto r = aw::test::run_binary("jobs show 1", base + "/no_such_database");
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "invalid configuration: database.url"));
  BOOST_TEST(contains(r.err, "does not exist"));
  auto at = base.find("postgres@");
  BOOST_REQUIRE(at != std::string::npos);
  auto ghost = base.substr(0, at) + "ghost@" + base.substr(at + 9) + "/postgres";
  r = aw::test::run_binary("jobs show 1", ghost);
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(contains(r.err, "role \"ghost\" does not exist"));
  // A malformed URL: libpq quotes it, password and all; the message masks it.
  r = aw::test::run_binary("jobs show 1", "postgresql://user:SECRET@[::1/db");
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(!contains(r.err, "SECRET"), r.err);
  BOOST_TEST(contains(r.err, "user:***@"), r.err);
  // `run` stops at once instead of retrying forever.
  auto started = std::chrono::steady_clock::now();
  r = aw::test::run_binary("run", base + "/no_such_database");
  BOOST_TEST(r.exit_code == 2, r.err);
  BOOST_TEST(!contains(r.out + r.err, "SECRET"));
  BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds{20}));
}

BOOST_AUTO_TEST_CASE(a_malformed_percent_escape_in_the_url_exits_2_and_never_shows_the_password) {
  aw::test::fresh_database db;
  auto base = db.url.substr(0, db.url.rfind('/'));
  auto at = base.find("postgres@");
  BOOST_REQUIRE(at != std::string::npos);
  // libpq quotes the token with the bad escape alone: here, the password.
  for (const auto* password : {"S3cret%zzPw", "S3cret%00Pw"})
    BOOST_TEST_CONTEXT(password) {
      auto url = base.substr(0, at) + "postgres:" + password + "@"
                 + base.substr(at + 9) + "/postgres";
      auto r = aw::test::run_binary("jobs list", url);
      BOOST_TEST(r.exit_code == 2, r.err);
      BOOST_TEST(!contains(r.out + r.err, "S3cret"), r.err);
      BOOST_TEST(!contains(r.out + r.err, "Pw"), r.err);
      BOOST_TEST(contains(r.err, "invalid configuration: database.url"), r.err);
      BOOST_TEST(contains(r.err, "a %XX escape in the URL is malformed"), r.err);
      // `run` stops at once instead of logging it on every retry.
      auto started = std::chrono::steady_clock::now();
      r = aw::test::run_binary("run", url);
      BOOST_TEST(r.exit_code == 2, r.err);
      BOOST_TEST(!contains(r.out + r.err, "S3cret"), r.err);
      BOOST_TEST((std::chrono::steady_clock::now() - started
                  < std::chrono::seconds{20}));
    }
}

BOOST_AUTO_TEST_CASE(bad_usage_exits_2_with_a_message_that_says_what_and_version_exits_0) {
  aw::test::fresh_database db;
  struct usage {
    std::string args;
    std::string says;
  };
  for (const auto& c : std::vector<usage>{
         {"frobnicate", "unknown command 'frobnicate' (commands: migrate, run,"},
         {"", "no command given"},
         {"dlq list --limit -1", "--limit: Value -1 not in range 1 to 1000000"},
         {"enqueue --max-attempts 0 noop", "not in range 1 to 1000000"},
         {"callback complete not-a-uuid", "CALLBACK_ID 'not-a-uuid' is not a callback id"}})
    BOOST_TEST_CONTEXT(c.args) {
      auto r = aw::test::run_binary(c.args, db.url);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.says), r.err);
    }
  auto r = aw::test::run_binary("--version", db.url);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(contains(r.out, "actor-worker 0."), r.out);
}

BOOST_AUTO_TEST_CASE(jobs_show_json_prints_the_row_keyed_by_column_names) {
  aw::test::fresh_database db;
  aw::insert_options opts;
  opts.tags = {"t1"};
  opts.metadata = {{"m", true}};
  auto id = enqueue_one(db, "noop", {{"x", 7}}, opts);
  auto r = aw::test::run_binary("jobs show " + std::to_string(id) + " --json",
                                db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto row = nlohmann::json::parse(r.out);
  BOOST_REQUIRE(row.is_object());
  aw::test::db_session s{db.url};
  BOOST_TEST(keys_of(row) == s.columns_of("jobs_live"));
  BOOST_TEST(row["id"] == id);
  BOOST_TEST(row["kind"] == "noop");
  BOOST_TEST(row["args"] == (nlohmann::json{{"x", 7}}));
  BOOST_TEST(row["state"] == "available");
  BOOST_TEST(row["tags"] == (nlohmann::json{"t1"}));
  BOOST_TEST(row["metadata"] == (nlohmann::json{{"m", true}}));
  BOOST_TEST(row["max_attempts"].is_null());
  // --json is one line.
  BOOST_TEST(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

BOOST_AUTO_TEST_CASE(jobs_show_json_of_a_dead_lettered_job_prints_its_dead_letter) {
  aw::test::fresh_database db;
  auto id = db.scalar("INSERT INTO jobs_in (kind, state, attempt, ready_xid) "
                      "VALUES ('gone', 'running', 1, '0') RETURNING id");
  db.exec("SELECT actor_worker_dead_letter(" + std::to_string(id) + ", 'boom')");
  auto r = aw::test::run_binary("jobs show --json " + std::to_string(id), db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  auto row = nlohmann::json::parse(r.out);
  BOOST_TEST(row.value("state", std::string{}) == "dead_lettered");
  BOOST_TEST(row.value("original_job_id", int64_t{0}) == id);
  BOOST_TEST(row.value("last_error_message", std::string{}) == "boom");
}

BOOST_AUTO_TEST_CASE(jobs_show_of_a_missing_id_exits_1_with_a_clear_message) {
  aw::test::fresh_database db;
  auto r = aw::test::run_binary("jobs show 424242 --json", db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(contains(r.err, "job 424242 not found"));
}

BOOST_AUTO_TEST_CASE(dlq_list_json_prints_dead_letter_rows_newest_first) {
  aw::test::fresh_database db;
  auto first = enqueue_one(db, "fail", {{"n", 1}});
  auto second = enqueue_one(db, "fail", {{"n", 2}});
  {
    // Dead-letter both the way a worker does, one after the other.
    aw::storage::job_store_options opts;
    opts.url = db.url;
    opts.worker_id = "cli-test";
    aw::storage::job_store store{opts};
    auto claimed = store.claim("default", 2).jobs;
    BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
    store.finish({aw::test::outcome(claimed, first,
                                    aw::outcome_kind::terminal_failure,
                                    "first failure")});
    store.finish({aw::test::outcome(claimed, second,
                                    aw::outcome_kind::terminal_failure,
                                    "second failure")});
  }
  auto r = aw::test::run_binary("dlq list --json", db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  auto rows = nlohmann::json::parse(r.out);
  BOOST_REQUIRE(rows.is_array());
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  aw::test::db_session s{db.url};
  auto columns = s.columns_of("dead_letter_jobs");
  for (auto& row : rows)
    BOOST_TEST(keys_of(row) == columns);
  BOOST_TEST(rows[0]["original_job_id"] == second);
  BOOST_TEST(rows[0]["last_error_message"] == "second failure");
  BOOST_TEST(rows[1]["original_job_id"] == first);
  BOOST_TEST(rows[1]["args"] == (nlohmann::json{{"n", 1}}));
  BOOST_TEST(rows[1]["kind"] == "fail");
  BOOST_TEST(rows[1]["error_count"] == 1);
  // A queue filter that matches nothing gives an empty array.
  auto none = aw::test::run_binary("dlq list --json --queue other", db.url);
  BOOST_REQUIRE_EQUAL(none.exit_code, 0);
  BOOST_TEST(nlohmann::json::parse(none.out) == nlohmann::json::array());
  // jobs show points at the dead letter queue for a dead-lettered job and
  // prints its dead letter.
  auto show = aw::test::run_binary("jobs show " + std::to_string(first), db.url);
  BOOST_TEST(show.exit_code == 0);
  BOOST_TEST(contains(show.err, "dead letter queue"));
  BOOST_TEST(contains(show.out, "\"dead_lettered\""));
}

BOOST_AUTO_TEST_CASE(invalid_config_exits_2_naming_file_line_and_key) {
  aw::test::fresh_database db;
  struct bad_config {
    const char* what;
    std::string toml;
    std::string location; // "FILE" + this
    std::string complaint;
  };
  const std::vector<bad_config> cases{
    {"unknown key", "[worker]\nnode = \"n1\"\nbogus = 1\n",
     ":3: key 'worker.bogus'", "unknown key"},
    {"wrong type", "[database]\npool_size = 2\n\n[worker]\nmax_retries = \"ten\"\n",
     ":5: key 'worker.max_retries'", "expected an integer"},
    {"bad duration", "[worker]\npoll_interval = \"5 parsecs\"\n",
     ":2: key 'worker.poll_interval'", "invalid duration \"5 parsecs\""},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      temp_file file{c.toml};
      // `run` would not return with a valid config: bounded, to be safe.
      auto r = run_bounded({"run", "--config", file.path}, db.url);
      BOOST_TEST_MESSAGE("stderr: " << r.err);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, file.path + c.location));
      BOOST_TEST(contains(r.err, c.complaint));
    }
  }
}

BOOST_AUTO_TEST_CASE(check_refuses_what_run_refuses) {
  aw::test::fresh_database db;
  struct bad_config {
    const char* what;
    std::string toml;
    std::string says;
  };
  const std::vector<bad_config> cases{
    {"a kind of a built-in name",
     "[queues.default]\nconcurrency = 1\n\n[kinds.noop]\ncommand = [\"true\"]\n",
     ":4: key 'kinds.noop': 'noop' is a built-in kind of actor-worker"},
    {"a queue name with a line break",
     "[queues.\"mail\\nforged\"]\nconcurrency = 1\n",
     ":1: key 'queues.mail"},
    {"a queue name over 200 bytes",
     "[queues." + std::string(201, 'q') + "]\nconcurrency = 1\n",
     "a queue name must be 1 to 200 bytes without control characters"},
  };
  for (auto& c : cases)
    BOOST_TEST_CONTEXT(c.what) {
      temp_file file{c.toml};
      auto checked = aw::test::run_binary("--config " + file.path + " check",
                                          db.url);
      BOOST_TEST(checked.exit_code == 2, checked.out + checked.err);
      BOOST_TEST(contains(checked.err, c.says), checked.err);
      auto ran = run_bounded({"run", "--config", file.path}, db.url);
      BOOST_TEST(ran.exit_code == 2, ran.err);
      BOOST_TEST(contains(ran.err, c.says), ran.err);
    }
}

BOOST_AUTO_TEST_CASE(a_second_node_on_a_taken_listen_address_exits_2) {
  aw::test::fresh_database db;
  int port = 0;
  {
    aw::test::refusing_port free;
    port = free.port();
  }
  auto listen = "127.0.0.1:" + std::to_string(port);
  temp_file file{"[http]\nlisten = \"" + listen + "\"\n"};
  background_process first{{"run", "--config", file.path}, db.url};
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
                          [&] {
                            httplib::Client c{"127.0.0.1", port};
                            c.set_connection_timeout(1, 0);
                            auto res = c.Get("/healthz");
                            return !first.running() || (res && res->status == 200);
                          },
                          60s)
                          && first.running(),
                        "the first node does not serve; stderr: " << first.err());
  // The second one used to bind as well (SO_REUSEPORT), and the kernel
  // dealt the connections between the two.
  auto second = run_bounded({"run", "--config", file.path}, db.url);
  BOOST_TEST(second.exit_code == 2, second.err);
  BOOST_TEST(contains(second.err, "invalid configuration: http.listen: cannot "
                                  "listen on " + listen + ": the address is in use"),
             second.err);
  BOOST_TEST(first.running());
}

BOOST_AUTO_TEST_CASE(check_warns_when_nodes_share_a_listen_address) {
  aw::test::fresh_database db;
  temp_file shared{"[http]\nlisten = \"127.0.0.1:9464\"\n\n[nodes.web-1]\n\n"
                   "[nodes.web-2]\n"};
  auto r = aw::test::run_binary("--config " + shared.path + " check", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.err, "warning: nodes web-1, web-2 share the http listen "
                             "address 127.0.0.1:9464"),
             r.err);
  r = aw::test::run_binary("--config " + shared.path + " check --json", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  auto doc = nlohmann::json::parse(r.out);
  BOOST_TEST(doc["warnings"].size() == 1u);
  // One node, or none listening: nothing to warn about.
  temp_file single{"[http]\nlisten = \"127.0.0.1:9464\"\n\n[nodes.web-1]\n"};
  r = aw::test::run_binary("--config " + single.path + " check", db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(!contains(r.err, "warning"), r.err);
}

BOOST_AUTO_TEST_CASE(probes_answer_while_500_slow_or_idle_connections_are_open) {
  aw::test::fresh_database db;
  int port = 0;
  {
    aw::test::refusing_port free;
    port = free.port();
  }
  temp_file file{"[http]\nlisten = \"127.0.0.1:" + std::to_string(port) + "\"\n"};
  background_process worker{{"run", "--config", file.path}, db.url};
  auto probe = [&](const char* path) {
    httplib::Client c{"127.0.0.1", port};
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(5, 0);
    auto res = c.Get(path);
    return res ? res->status : 0;
  };
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
                          [&] { return !worker.running() || probe("/healthz") == 200; },
                          60s)
                          && worker.running(),
                        "the node does not serve; stderr: " << worker.err());
  // 250 idle connections (nothing sent) and 250 slow ones: a request line,
  // then a header line every 500 ms, never the end of the headers.
  auto connect_one = [&] {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    return fd;
  };
  std::vector<int> idle, slow;
  for (int i = 0; i < 250; ++i) {
    idle.push_back(connect_one());
    slow.push_back(connect_one());
    std::string start = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    BOOST_REQUIRE(::send(slow.back(), start.data(), start.size(), MSG_NOSIGNAL) > 0);
  }
  std::atomic<bool> stop_dripping{false};
  std::thread drip{[&] {
    int n = 0;
    while (!stop_dripping) {
      auto line = "X-Slow-" + std::to_string(n++) + ": 1\r\n";
      for (int fd : slow)
        ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(500ms);
    }
  }};
  // For 6 s (past the idle timeout) every probe answers within 5 s (a
  // bound for a loaded test host: starved, they did not answer at all).
  auto until = std::chrono::steady_clock::now() + 6s;
  int probes = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (auto* path : {"/healthz", "/readyz", "/metrics"}) {
      auto started = std::chrono::steady_clock::now();
      auto status = probe(path);
      BOOST_TEST((status == 200 || (status == 503 && std::string{path} == "/readyz")),
                 path << " answered " << status);
      BOOST_TEST((std::chrono::steady_clock::now() - started < 5s), path);
      ++probes;
    }
    std::this_thread::sleep_for(200ms);
  }
  BOOST_TEST(probes > 10);
  // The node still stops promptly with slow clients connected.
  worker.signal(SIGTERM);
  auto code = worker.wait_exit(20s);
  stop_dripping = true;
  drip.join();
  for (int fd : idle)
    ::close(fd);
  for (int fd : slow)
    ::close(fd);
  BOOST_REQUIRE_MESSAGE(code.has_value(), "still running 20 s after SIGTERM");
  BOOST_TEST(*code == 0, worker.err());
}

BOOST_AUTO_TEST_CASE(run_against_a_schema_missing_a_column_exits_naming_it) {
  aw::test::fresh_database db;
  db.exec("ALTER TABLE dead_letter_jobs DROP COLUMN tags");
  auto r = run_bounded({"run"}, db.url);
  BOOST_TEST_MESSAGE("stderr: " << r.err);
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(contains(r.err, "table dead_letter_jobs is missing column tags"));
  BOOST_TEST(contains(r.err, "actor-worker migrate"));
}

BOOST_AUTO_TEST_CASE(run_processes_jobs_and_exits_0_on_sigterm) {
  aw::test::fresh_database db;
  auto id = enqueue_one(db, "noop", {});
  aw::test::db_session s{db.url};
  background_process worker{{"run"}, db.url};
  // It works: the job completes.
  BOOST_REQUIRE_MESSAGE(
    aw::test::wait_until(
      [&] {
        return !worker.running()
               || s.text("SELECT state FROM jobs_live WHERE id = "
                         + std::to_string(id))
                    == "completed";
      },
      60s)
      && worker.running(),
    "the worker did not complete the job; stderr: " << worker.err());
  worker.signal(SIGTERM);
  auto code = worker.wait_exit(30s);
  BOOST_TEST_MESSAGE("stderr: " << worker.err());
  BOOST_REQUIRE_MESSAGE(code.has_value(), "still running 30 s after SIGTERM");
  BOOST_TEST(*code == 0);
  BOOST_TEST(contains(worker.err(), "received SIGTERM, shutting down gracefully"));
}

BOOST_AUTO_TEST_CASE(a_cluster_file_runs_the_named_node_and_check_validates_every_node) {
  aw::test::fresh_database db;
  temp_file file{"[cluster]\nname = \"test\"\n\n"
                 "[worker]\npoll_interval = \"100ms\"\n\n"
                 "[queues.default]\nconcurrency = 2\n\n"
                 "[nodes.a]\nqueues = [\"default\", \"mail\"]\n\n"
                 "[nodes.b.queues.mail]\nconcurrency = 3\n"};
  // check: every node and what it runs, without a database.
  auto ok = run_bounded({"check", "--config", file.path}, "");
  BOOST_TEST(ok.exit_code == 0, ok.err);
  BOOST_TEST(contains(ok.out, "cluster 'test', 2 node(s)"), ok.out);
  BOOST_TEST(contains(ok.out, "node a: queues default (concurrency 2), mail "
                              "(concurrency 10)"),
             ok.out);
  BOOST_TEST(contains(ok.out, "node b: queues mail (concurrency 3)"), ok.out);
  auto json = nlohmann::json::parse(
    run_bounded({"check", "--config", file.path, "--json"}, "").out);
  BOOST_TEST(json["nodes"].size() == 2u);
  // An undefined node: exit 2, naming the defined ones.
  auto unknown = run_bounded({"run", "--config", file.path, "--node", "zz"},
                             db.url);
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(contains(unknown.err, "its nodes are: a, b"), unknown.err);
  // A broken node: check exits 2 with file, line and key.
  temp_file broken{"[nodes.a]\nqueues = [\"q\"]\n[nodes.b]\nmax_retries = -1\n"};
  auto bad = run_bounded({"check", "--config", broken.path}, "");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(contains(bad.err, broken.path + ":4: key 'nodes.b.max_retries'"),
             bad.err);
  // Node b serves mail only: its job runs, default's waits.
  auto mail = enqueue_one(db, "noop", {}, [] {
    aw::insert_options o;
    o.queue = "mail";
    return o;
  }());
  auto other = enqueue_one(db, "noop", {});
  aw::test::db_session s{db.url};
  background_process worker{{"run", "--config", file.path, "--node", "b"},
                            db.url};
  auto state = [&](int64_t id) {
    return s.text("SELECT state FROM jobs_live WHERE id = " + std::to_string(id));
  };
  BOOST_REQUIRE_MESSAGE(
    aw::test::wait_until([&] { return state(mail) == "completed"; }, 60s),
    "node b did not run the mail job; stderr: " << worker.err());
  BOOST_TEST(state(other) == "available");
  // (INFO lines reach a pipe within a second.)
  BOOST_TEST(aw::test::wait_until(
               [&] {
                 return contains(worker.err(),
                                 "node b, queues mail (concurrency 3)");
               },
               10s),
             worker.err());
  worker.signal(SIGTERM);
  BOOST_TEST(worker.wait_exit(30s).value_or(-1) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
