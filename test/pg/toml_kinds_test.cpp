// Command and HTTP kinds from TOML, end to end: the actor-worker binary
// runs with a config of [kinds.NAME] tables against a real database, real
// /bin/sh scripts and a real HTTP server on a loopback port; the jobs'
// rows, dead letters and the worker's log tell what happened.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "cli_process.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "support/http_test_server.hpp"

using namespace std::chrono_literals;
using aw::test::contains;

namespace {

using aw::test::slurp;

/// A scratch directory for scripts, the config and the worker's output,
/// removed at the end.
struct scratch_dir {
  scratch_dir() {
    char tmpl[] = "/tmp/aw_toml_kinds_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~scratch_dir() {
    std::system(("rm -rf " + path).c_str());
  }
  std::string write(const std::string& name, const std::string& text) const {
    auto file = path + "/" + name;
    std::ofstream{file} << text;
    return file;
  }
  std::string path;
};

/// `actor-worker run --config CONFIG --log-level trace` in the background
/// (cli_process.hpp), its log being what it wrote to stdout and stderr.
class worker_process {
public:
  worker_process(const std::string& config, const std::string& url,
                 const scratch_dir&)
    : proc_({"run", "--config", config, "--log-level", "trace"}, url) {
  }

  /// SIGTERM, then the exit code (nothing if it did not exit in time).
  std::optional<int> stop(std::chrono::milliseconds timeout = 30s) {
    proc_.signal(SIGTERM);
    return proc_.wait_exit(timeout);
  }

  std::string log() const {
    return proc_.out() + proc_.err();
  }

private:
  aw::test::background_process proc_;
};

int64_t enqueue(const aw::test::fresh_database& db, const std::string& kind,
                const nlohmann::json& args = nlohmann::json::object(),
                const aw::insert_options& opts = {}) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, kind, args, opts);
  tx.commit();
  return id;
}

/// What became of a job: its row in `jobs`, or its dead letter.
struct job_state {
  std::string state; // "dead_letter" when dead-lettered
  int error_count = 0;
  std::string message;
  /// Seconds from now to run_at (scheduled jobs).
  double run_in = 0;
};

job_state state_of(aw::test::db_session& s, int64_t id) {
  auto id_s = std::to_string(id);
  auto rows = s.query("SELECT state, error_count, coalesce(last_error_message, ''), "
                      "extract(epoch FROM run_at - now())::float8 "
                      "FROM jobs_live WHERE id = " + id_s);
  if (!rows.empty())
    return {rows[0][0].as<std::string>(), rows[0][1].as<int>(),
            rows[0][2].as<std::string>(), rows[0][3].as<double>()};
  auto dead = s.query("SELECT error_count, coalesce(last_error_message, '') "
                      "FROM dead_letter_jobs WHERE original_job_id = " + id_s);
  if (!dead.empty())
    return {"dead_letter", dead[0][0].as<int>(), dead[0][1].as<std::string>(), 0};
  return {"missing", 0, "", 0};
}

/// Waits until every job in `ids` has left `available` and `running` (a
/// failed one is `scheduled` with a last error, a snoozed one `scheduled`
/// without).
void wait_settled(aw::test::db_session& s, const std::vector<int64_t>& ids,
                  const worker_process& worker) {
  auto settled = aw::test::wait_until(
    [&] {
      for (auto id : ids) {
        auto st = state_of(s, id);
        if (st.state == "available" || st.state == "running")
          return false;
      }
      return true;
    },
    60s);
  if (!settled)
    BOOST_TEST_MESSAGE("worker log:\n" << worker.log());
  BOOST_REQUIRE(settled);
}

/// The state of job `id` once it is not mid-run: a job that failed and was
/// rescheduled runs again after its backoff (2 s, 4 s, ...), and a check
/// that reads it during that retry would see it 'running'.
job_state settled_state(aw::test::db_session& s, int64_t id) {
  job_state st;
  aw::test::wait_until(
    [&] {
      st = state_of(s, id);
      return st.state != "available" && st.state != "running";
    },
    20s);
  return st;
}

/// A process of this pid still runs (zombies do not count).
bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return false;
  auto stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto paren = stat.rfind(')');
  return paren == std::string::npos || stat.size() < paren + 3
         || stat[paren + 2] != 'Z';
}

} // namespace

BOOST_AUTO_TEST_SUITE(toml_kinds_test)

BOOST_AUTO_TEST_CASE(command_kinds_run_through_the_binary) {
  aw::test::fresh_database db;
  scratch_dir dir;
  // Each script reads its job from stdin.
  auto ok = dir.write("ok.sh", "cat > " + dir.path + "/stdin.json\n");
  // Exits with args.code, saying so on stderr.
  auto exit_with = dir.write("exit.sh",
                             "code=$(sed -n 's/.*\"code\":\\([0-9]*\\).*/\\1/p')\n"
                             "echo \"giving up with $code\" >&2\n"
                             "exit \"$code\"\n");
  auto outcome = dir.write("outcome.sh",
                           "cat >/dev/null\necho 'progress: 100%'\n"
                           "echo '{\"outcome\": \"snooze\", \"for\": \"1h\"}'\n");
  auto crash = dir.write("crash.sh", "echo 'segfaulting now' >&2\n"
                                     "kill -SEGV $$\n");
  auto stubborn = dir.write("stubborn.sh",
                            "trap '' TERM\necho $$ > " + dir.path
                              + "/stubborn.pid\nsleep 60\n");
  auto big = dir.write("big.sh",
                       "yes 'stdout line' | head -c 52428800\n"
                       "yes 'stderr line' | head -c 52428800 >&2\nexit 0\n");
  auto config = dir.write("worker.toml", R"(
[worker]
node = "toml-kinds"
poll_interval = "100ms"
shutdown_drain = "1s"

[queues.default]
concurrency = 20

[kinds.sh_ok]
command = ["/bin/sh", ")" + ok + R"("]

[kinds.sh_exit]
command = ["/bin/sh", ")" + exit_with + R"("]

[kinds.sh_outcome]
command = ["/bin/sh", ")" + outcome + R"("]

[kinds.sh_crash]
command = ["/bin/sh", ")" + crash + R"("]

[kinds.sh_missing]
command = [")" + dir.path + R"(/no-such-program", "--flag"]

[kinds.sh_stubborn]
command = ["/bin/sh", ")" + stubborn + R"("]
kill_grace = "1s"

[kinds.sh_big]
command = ["/bin/sh", ")" + big + R"("]
)");
  worker_process worker{config, db.url, dir};
  std::map<std::string, int64_t> id;
  id["ok"] = enqueue(db, "sh_ok", {{"to", "ann@example.com"}});
  id["75"] = enqueue(db, "sh_exit", {{"code", 75}});
  id["65"] = enqueue(db, "sh_exit", {{"code", 65}});
  id["3"] = enqueue(db, "sh_exit", {{"code", 3}});
  id["outcome"] = enqueue(db, "sh_outcome");
  id["crash"] = enqueue(db, "sh_crash");
  id["missing"] = enqueue(db, "sh_missing");
  aw::insert_options one_second;
  one_second.deadline = 1s;
  id["stubborn"] = enqueue(db, "sh_stubborn", {}, one_second);
  id["big"] = enqueue(db, "sh_big");
  aw::test::db_session s{db.url};
  std::vector<int64_t> ids;
  for (auto& [name, i] : id)
    ids.push_back(i);
  wait_settled(s, ids, worker);

  auto ok_state = settled_state(s, id["ok"]);
  BOOST_TEST(ok_state.state == "completed");
  auto doc = nlohmann::json::parse(slurp(dir.path + "/stdin.json"));
  BOOST_TEST(doc.at("id") == id["ok"]);
  BOOST_TEST(doc.at("kind") == "sh_ok");
  BOOST_TEST(doc.at("args").at("to") == "ann@example.com");
  BOOST_TEST(doc.at("attempt") == 1);

  auto tempfail = settled_state(s, id["75"]);
  BOOST_TEST(tempfail.state == "scheduled");
  BOOST_TEST(tempfail.error_count >= 1);
  BOOST_TEST(tempfail.message == "the command exited with code 75 "
                                 "(EX_TEMPFAIL): giving up with 75");
  auto dataerr = settled_state(s, id["65"]);
  BOOST_TEST(dataerr.state == "dead_letter");
  BOOST_TEST(dataerr.message == "the command exited with code 65 "
                                "(EX_DATAERR): giving up with 65");
  auto other = settled_state(s, id["3"]);
  BOOST_TEST(other.state == "scheduled");
  BOOST_TEST(other.message == "the command exited with code 3: giving up "
                              "with 3");

  auto snoozed = settled_state(s, id["outcome"]);
  BOOST_TEST(snoozed.state == "scheduled");
  BOOST_TEST(snoozed.error_count == 0);
  BOOST_TEST((snoozed.run_in > 3500 && snoozed.run_in <= 3600),
             snoozed.run_in);

  auto crashed = settled_state(s, id["crash"]);
  BOOST_TEST(crashed.state == "scheduled");
  BOOST_TEST(crashed.message == "the command was killed by SIGSEGV: "
                                "segfaulting now");

  auto missing = settled_state(s, id["missing"]);
  BOOST_TEST(missing.state == "scheduled");
  BOOST_TEST(contains(missing.message, "cannot run " + dir.path
                                         + "/no-such-program: spawn: No such "
                                           "file or directory"),
             missing.message);

  // The deadline cancelled the run; the script ignored SIGTERM and got
  // SIGKILL a second later.
  auto stubborn_state = settled_state(s, id["stubborn"]);
  BOOST_TEST(stubborn_state.state == "scheduled");
  BOOST_TEST(stubborn_state.error_count >= 1);
  BOOST_TEST(contains(stubborn_state.message, "deadline exceeded"),
             stubborn_state.message);
  auto stubborn_pid = std::stoi(slurp(dir.path + "/stubborn.pid"));
  BOOST_TEST(aw::test::wait_until([&] { return !process_alive(stubborn_pid); },
                                  5s));

  BOOST_TEST(settled_state(s, id["big"]).state == "completed");

  BOOST_TEST(worker.stop().value_or(-1) == 0);
  auto log = worker.log();
  BOOST_TEST(contains(log, "job " + std::to_string(id["stubborn"])
                             + ": its command still runs 1s after SIGTERM; "
                               "sending SIGKILL to its process group"),
             log);
  BOOST_TEST(contains(log, "sh_ok"), "the kinds are listed at start");
}

BOOST_AUTO_TEST_CASE(http_kinds_run_through_the_binary) {
  aw::test::fresh_database db;
  scratch_dir dir;
  aw::test::http_test_server server;
  const std::string token = "e2e-token-4f9a1c2b7d";
  ::setenv("AW_E2E_API_TOKEN", token.c_str(), 1);
  auto kind = [&](const std::string& name, const std::string& path,
                  const std::string& extra = "") {
    return "[kinds." + name + "]\nhttp = { url = \"" + server.url(path)
           + "\", headers = { Authorization = \"Bearer ${AW_E2E_API_TOKEN}\" }"
           + extra + " }\n\n";
  };
  auto config = dir.write(
    "worker.toml",
    "[worker]\nnode = \"http-kinds\"\npoll_interval = \"100ms\"\n"
    "shutdown_drain = \"1s\"\n\n[queues.default]\nconcurrency = 20\n\n"
      + kind("h_record", "/record") + kind("h_outcome", "/outcome")
      + kind("h_429", "/429") + kind("h_503", "/503") + kind("h_404", "/404")
      + kind("h_500", "/500") + kind("h_slow", "/slow", ", timeout = \"300ms\"")
      + kind("h_echo", "/echo-auth")
      + "[kinds.h_refused]\nhttp = { url = \"http://127.0.0.1:1/x\" }\n");
  worker_process worker{config, db.url, dir};
  ::unsetenv("AW_E2E_API_TOKEN");
  std::map<std::string, int64_t> id;
  for (auto name : {"h_record", "h_outcome", "h_429", "h_503", "h_404",
                    "h_500", "h_slow", "h_echo", "h_refused"})
    id[name] = enqueue(db, name, {{"n", 1}});
  aw::test::db_session s{db.url};
  std::vector<int64_t> ids;
  for (auto& [name, i] : id)
    ids.push_back(i);
  wait_settled(s, ids, worker);

  BOOST_TEST(settled_state(s, id["h_record"]).state == "completed");
  BOOST_TEST(server.authorization() == "Bearer " + token);
  BOOST_TEST(server.content_type() == "application/json");
  auto doc = nlohmann::json::parse(server.body());
  BOOST_TEST(doc.at("id") == id["h_record"]);
  BOOST_TEST(doc.at("args").at("n") == 1);

  auto snoozed = settled_state(s, id["h_outcome"]);
  BOOST_TEST(snoozed.state == "scheduled");
  BOOST_TEST(snoozed.error_count == 0);

  auto limited = settled_state(s, id["h_429"]);
  BOOST_TEST(limited.state == "scheduled");
  BOOST_TEST(limited.error_count == 1);
  BOOST_TEST((limited.run_in > 4 && limited.run_in <= 7), limited.run_in);
  BOOST_TEST(contains(limited.message, "HTTP 429"), limited.message);

  auto unavailable = settled_state(s, id["h_503"]);
  BOOST_TEST(unavailable.error_count >= 1);
  BOOST_TEST(unavailable.message == "HTTP 503 from " + server.url("/503"));

  auto not_found = settled_state(s, id["h_404"]);
  BOOST_TEST(not_found.state == "dead_letter");
  BOOST_TEST(not_found.message
             == "HTTP 404 from " + server.url("/404") + ": no such endpoint");

  auto error = settled_state(s, id["h_500"]);
  BOOST_TEST(error.state == "scheduled");
  BOOST_TEST(contains(error.message, "HTTP 500"));

  auto slow = settled_state(s, id["h_slow"]);
  BOOST_TEST(slow.state == "scheduled");
  BOOST_TEST(slow.message == "the HTTP request to " + server.url("/slow")
                               + " timed out after 300ms");

  auto refused = settled_state(s, id["h_refused"]);
  BOOST_TEST(refused.state == "scheduled");
  BOOST_TEST(contains(refused.message, "the HTTP request to "
                                       "http://127.0.0.1:1/x failed"),
             refused.message);

  // The server echoed the token into its 401 body: masked.
  auto echoed = settled_state(s, id["h_echo"]);
  BOOST_TEST(echoed.state == "dead_letter");
  BOOST_TEST(contains(echoed.message, "invalid credentials: [redacted]"),
             echoed.message);

  BOOST_TEST(worker.stop().value_or(-1) == 0);
  // Never in the log (at trace level), nor in any row.
  auto log = worker.log();
  BOOST_TEST(contains(log, "HTTP 404"), "the failures are logged");
  BOOST_TEST(!contains(log, token));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE last_error_message "
                      "LIKE '%" + token + "%'") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE "
                      "last_error_message LIKE '%" + token + "%'") == 0);
}

BOOST_AUTO_TEST_CASE(command_and_http_kinds_get_their_callback_id_before_they_answer) {
  aw::test::fresh_database db;
  scratch_dir dir;
  // The script hands its id on (a file the test reads), keeps its job
  // document, waits for the test's word, then answers wait_for_callback.
  auto hand = dir.write(
    "hand.sh", "cat > " + dir.path + "/doc.json\n"
               "echo \"$AW_CALLBACK_ID\" > " + dir.path + "/id.tmp\n"
               "mv " + dir.path + "/id.tmp " + dir.path + "/id\n"
               "while [ ! -f " + dir.path + "/go ]; do sleep 0.05; done\n"
               "echo '{\"outcome\": \"wait_for_callback\", \"timeout\": \"1s\"}'\n");
  // The service resolves its callback (through the CLI, as any external
  // party would) before it answers the request.
  aw::test::http_test_server server;
  std::mutex mtx;
  std::string header_id, body_id, resolved;
  server.on_post("/hand", [&](const std::string& id, const std::string& body) {
    auto doc = nlohmann::json::parse(body);
    auto r = aw::test::run_binary("callback complete " + id + " '{\"via\": \"http\"}'",
                                  db.url);
    std::lock_guard<std::mutex> guard{mtx};
    header_id = id;
    body_id = doc.value("callback_id", std::string{});
    resolved = r.out + r.err;
    return std::string{R"({"outcome": "wait_for_callback"})"};
  });
  auto config = dir.write("worker.toml", R"(
[worker]
node = "callback-kinds"
poll_interval = "100ms"
shutdown_drain = "1s"

[queues.default]
concurrency = 4

[kinds.sh_hand]
command = ["/bin/sh", ")" + hand + R"("]
callback_timeout = "1h"

[kinds.h_hand]
http = { url = ")" + server.url("/hand") + R"(" }
callback_timeout = "1h"
)");
  worker_process worker{config, db.url, dir};
  aw::test::db_session s{db.url};
  auto command_job = enqueue(db, "sh_hand");
  auto http_job = enqueue(db, "h_hand");

  // Command kind: the id is in AW_CALLBACK_ID and in the job document.
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
                          [&] { return ::access((dir.path + "/id").c_str(), F_OK) == 0; },
                          60s),
                        "the script never got its id; worker log:\n" << worker.log());
  auto id = slurp(dir.path + "/id");
  id.erase(id.find_last_not_of("\n") + 1);
  BOOST_REQUIRE(aw::storage::is_callback_id(id));
  auto doc = nlohmann::json::parse(slurp(dir.path + "/doc.json"));
  BOOST_TEST(doc.value("callback_id", std::string{}) == id);
  BOOST_TEST(state_of(s, command_job).state == "running");
  auto r = aw::test::run_binary("callback complete " + id + " '{\"via\": \"sh\"}'",
                                db.url);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "still running; complete kept"), r.out);
  dir.write("go", "");
  BOOST_REQUIRE(aw::test::wait_until(
    [&] { return state_of(s, command_job).state == "completed"; }, 60s));
  BOOST_TEST(s.check("SELECT callback_result = '{\"via\": \"sh\"}'::jsonb FROM "
                     "jobs_live WHERE id = " + std::to_string(command_job)));

  // HTTP kind: the id is in X-AW-Callback-Id and in the body.
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
    [&] { return state_of(s, http_job).state == "completed"; }, 60s),
    "worker log:\n" << worker.log());
  {
    std::lock_guard<std::mutex> guard{mtx};
    BOOST_TEST(aw::storage::is_callback_id(header_id));
    BOOST_TEST(body_id == header_id);
    BOOST_TEST(contains(resolved, "still running; complete kept"), resolved);
  }
  BOOST_TEST(s.check("SELECT callback_result = '{\"via\": \"http\"}'::jsonb FROM "
                     "jobs_live WHERE id = " + std::to_string(http_job)));
  BOOST_TEST(worker.stop().value_or(-1) == 0);
  BOOST_TEST(contains(worker.log(), "was applied as it parked (completed)"));
}

BOOST_AUTO_TEST_CASE(config_errors_of_kinds_stop_run_with_exit_2) {
  aw::test::fresh_database db;
  scratch_dir dir;
  ::unsetenv("AW_E2E_UNSET_TOKEN");
  auto unset = dir.write("unset.toml",
                         "[kinds.notify]\nhttp = { url = \"http://h/x\", "
                         "headers = { Authorization = "
                         "\"${AW_E2E_UNSET_TOKEN}\" } }\n");
  auto r = aw::test::run_binary("run --config " + unset, db.url);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, unset + ":2: key "
                               "'kinds.notify.http.headers.Authorization': "
                               "environment variable AW_E2E_UNSET_TOKEN is "
                               "not set"),
             r.err);
  // Other commands read the same file without the worker's secrets.
  auto show = aw::test::run_binary("jobs show 1 --config " + unset, db.url);
  BOOST_TEST(show.exit_code == 1, show.err); // no such job
  // A built-in kind's name is refused, naming the line.
  auto builtin = dir.write("builtin.toml",
                           "\n\n[kinds.sleep]\ncommand = [\"/bin/true\"]\n");
  auto b = aw::test::run_binary("run --config " + builtin, db.url);
  BOOST_TEST(b.exit_code == 2);
  BOOST_TEST(contains(b.err, builtin + ":3: key 'kinds.sleep': 'sleep' is a "
                                       "built-in kind"),
             b.err);
}

BOOST_AUTO_TEST_SUITE_END()
