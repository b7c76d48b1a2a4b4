// The dashboard's HTTP API on a real worker process and database: every
// read against the database's own answer, every action with its effect and
// audit row, and the security checks over real HTTP (Host allowlist,
// Origin, content type, method, token, read_only, protect_reads, token_env,
// headers). The page itself is driven in a browser by
// dashboard_browser_test.

#include <boost/test/unit_test.hpp>

#include <thread>

#include <set>

#include "dashboard_support.hpp"
#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;
using namespace aw::fault::dash;

namespace {

std::string port_text(int port) {
  return std::to_string(port);
}

/// Waits for the endpoint and a queue sample taken after `condition`.
void wait_ready(int port) {
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] { return get(port, "/readyz").status == 200; }, 60s),
    "the worker never became ready");
}

} // namespace

BOOST_AUTO_TEST_SUITE(dashboard_api_test)

BOOST_AUTO_TEST_CASE(security_checks_over_real_http) {
  fault_env env{"dash_security"};
  port_reservation http;
  worker_timings t;
  t.extra_toml = http_toml(http.port(), "token = \"" + token + "\"\n");
  auto w = env.start_worker("A", t);
  wait_ready(http.port());
  int p = http.port();

  // The page: compiled in, with its security headers.
  auto page = get(p, "/");
  BOOST_TEST(page.status == 200);
  BOOST_TEST(contains(page.header("Content-Type"), "text/html"));
  BOOST_TEST(contains(page.body, "<script src=\"/app.js\""));
  auto csp = page.header("Content-Security-Policy");
  BOOST_TEST(contains(csp, "script-src 'self'"));
  BOOST_TEST(contains(csp, "frame-ancestors 'none'"));
  BOOST_TEST(!contains(csp, "unsafe-inline"));
  BOOST_TEST(page.header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(page.header("X-Frame-Options") == "DENY");
  auto js = get(p, "/app.js");
  BOOST_TEST(js.status == 200);
  BOOST_TEST(contains(js.header("Content-Type"), "text/javascript"));
  BOOST_TEST(!contains(js.body, "innerHTML"));
  BOOST_TEST(get(p, "/app.css").status == 200);
  auto chart = get(p, "/vendor/chart.min.js");
  BOOST_TEST(chart.status == 200);
  BOOST_TEST(contains(chart.body, "Chart.js"), "Chart.js is compiled in");
  auto nope = get(p, "/nope");
  BOOST_TEST(nope.status == 404);
  BOOST_TEST(nope.header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(nope.header("X-Frame-Options") == "DENY");
  auto missing = get(p, "/api/nope");
  BOOST_TEST(missing.status == 404);
  BOOST_TEST(contains(missing.body, "/api/jobs"));

  // DNS rebinding: another name for this address.
  for (auto* path : {"/", "/app.js", "/api/session", "/api/overview",
                     "/api/jobs"}) {
    auto r = get(p, path, {{"Host", "evil.example:" + port_text(p)}});
    BOOST_TEST(r.status == 403, path);
    BOOST_TEST(contains(r.body, "allowed_hosts"), path);
  }
  BOOST_TEST(get(p, "/", {{"Host", "localhost:" + port_text(p)}}).status
             == 200);
  BOOST_TEST(get(p, "/", {{"Host", "[::1]:" + port_text(p)}}).status == 200);
  // The probes and /metrics are not the dashboard's: any Host (a kubelet
  // and a scraper use the pod's address).
  BOOST_TEST(get(p, "/healthz", {{"Host", "10.1.2.3:" + port_text(p)}}).status
             == 200);
  BOOST_TEST(get(p, "/metrics", {{"Host", "10.1.2.3:" + port_text(p)}}).status
             == 200);

  // Actions: the token, JSON, POST, this origin.
  const std::string path = "/api/jobs/424242/retry";
  const std::string origin = "http://127.0.0.1:" + port_text(p);
  auto bearer = "Bearer " + token;
  auto r = request(p, "POST", path, {{"Origin", origin}}, "{}",
                   "application/json");
  BOOST_TEST(r.status == 401);
  BOOST_TEST(r.header("WWW-Authenticate") == "Bearer");
  BOOST_TEST(!contains(r.body, token));
  r = request(p, "POST", path,
              {{"Origin", origin}, {"Authorization", "Bearer wrong-wrong-wrong-wrong"}},
              "{}", "application/json");
  BOOST_TEST(r.status == 401);
  // Never from the URL or a cookie.
  r = request(p, "POST", path + "?token=" + token, {{"Origin", origin}}, "{}",
              "application/json");
  BOOST_TEST(r.status == 401);
  r = request(p, "POST", path,
              {{"Origin", origin}, {"Cookie", "token=" + token}}, "{}",
              "application/json");
  BOOST_TEST(r.status == 401);
  // An HTML form's types, and no type.
  for (auto* type : {"text/plain", "application/x-www-form-urlencoded"}) {
    r = request(p, "POST", path, {{"Origin", origin}, {"Authorization", bearer}},
                "{}", type);
    BOOST_TEST(r.status == 415, type);
  }
  // (cpp-httplib refuses a malformed multipart body itself: 400.)
  r = request(p, "POST", path, {{"Origin", origin}, {"Authorization", bearer}},
              "{}", "multipart/form-data; boundary=x");
  BOOST_TEST((r.status == 415 || r.status == 400), r.status);
  // Cross-origin, with the token (a leaked token in another site's page
  // still cannot act through a visitor's browser).
  r = request(p, "POST", path,
              {{"Origin", "http://evil.example"}, {"Authorization", bearer}},
              "{}", "application/json");
  BOOST_TEST(r.status == 403);
  r = request(p, "POST", path,
              {{"Sec-Fetch-Site", "cross-site"}, {"Authorization", bearer}},
              "{}", "application/json");
  BOOST_TEST(r.status == 403);
  // The wrong method, either way.
  r = get(p, path, {{"Authorization", bearer}});
  BOOST_TEST(r.status == 405);
  BOOST_TEST(r.header("Allow") == "POST");
  r = request(p, "POST", "/api/jobs", {{"Authorization", bearer}}, "{}",
              "application/json");
  BOOST_TEST(r.status == 405);
  r = request(p, "DELETE", "/api/jobs/1", {{"Authorization", bearer}});
  BOOST_TEST(r.status == 405);
  // Bad bodies.
  r = request(p, "POST", path, {{"Origin", origin}, {"Authorization", bearer}},
              "not json", "application/json");
  BOOST_TEST(r.status == 400);
  r = act(p, "/api/dead-letters/retry", nlohmann::json::object());
  BOOST_TEST(r.status == 400);
  BOOST_TEST(contains(r.json()["error"].get<std::string>(), "\"all\": true"));
  r = act(p, "/api/dead-letters/purge", {{"queue", 5}});
  BOOST_TEST(r.status == 400);
  r = act(p, "/api/dead-letters/purge", {{"queues", "x"}});
  BOOST_TEST(r.status == 400);
  // Accepted: no such job (and the attempt is in the audit log).
  r = act(p, path);
  BOOST_TEST(r.status == 404, r.body);
  db_session db{env.url()};
  BOOST_TEST(db.scalar("SELECT count(*) FROM audit_log WHERE action = "
                       "'job.retry' AND target = '{\"job_id\": 424242}' AND "
                       "outcome = 'not found' AND remote_addr = '127.0.0.1'")
             == 1);
  // Refused requests wrote nothing.
  BOOST_TEST(db.scalar("SELECT count(*) FROM audit_log") == 1);

  // No CORS: nothing allows another origin to read the answers.
  auto o = request(p, "OPTIONS", "/api/overview",
                   {{"Origin", "http://evil.example"},
                    {"Access-Control-Request-Method", "POST"}});
  BOOST_TEST(o.header("Access-Control-Allow-Origin").empty());
  auto s = get(p, "/api/session", {{"Origin", "http://evil.example"}});
  BOOST_TEST(s.header("Access-Control-Allow-Origin").empty());
  BOOST_TEST(s.json()["actions_enabled"] == true);
  BOOST_TEST(s.json()["token_valid"] == false);
  BOOST_TEST(get(p, "/api/session", {{"Authorization", bearer}})
               .json()["token_valid"]
             == true);
  // Bad parameters.
  BOOST_TEST(get(p, "/api/jobs?state=bogus").status == 400);
  BOOST_TEST(get(p, "/api/jobs?limit=0").status == 400);
  BOOST_TEST(get(p, "/api/jobs?before=-1").status == 400);
  BOOST_TEST(get(p, "/api/jobs/999999").status == 404);
  // Text PostgreSQL cannot take: 400 naming the parameter, before any
  // statement (it was a 500 with an ERROR in the log, for anyone, as
  // reads need no token), and a NUL that used to cut the filter to
  // nothing (all rows).
  for (auto* bad : {"/api/jobs?queue=%FF", "/api/jobs?kind=%C3%28",
                    "/api/dead-letters?queue=abc%FE", "/api/jobs?queue=%00default",
                    "/api/jobs?kind=%00", "/api/dead-letters?kind=x%00y"}) {
    auto answer = get(p, bad);
    BOOST_TEST(answer.status == 400, bad << ": " << answer.body);
    BOOST_TEST(contains(answer.body, "the query parameter '"), bad << ": " << answer.body);
  }
  BOOST_TEST(!contains(w->err(), "[error]"), w->err());
}

BOOST_AUTO_TEST_CASE(read_only_protect_reads_and_token_env) {
  fault_env env{"dash_read_only"};
  port_reservation http;
  worker_timings t;
  t.env = {"AW_DASH_TOKEN=" + token};
  t.extra_toml = http_toml(http.port(), "token_env = \"AW_DASH_TOKEN\"\n"
                                        "read_only = true\n"
                                        "protect_reads = true\n");
  auto w = env.start_worker("A", t);
  wait_ready(http.port());
  int p = http.port();
  auto bearer = "Bearer " + token;

  // The page loads (it holds no data) and learns it needs the token.
  BOOST_TEST(get(p, "/").status == 200);
  auto s = get(p, "/api/session").json();
  BOOST_TEST(s["protect_reads"] == true);
  BOOST_TEST(s["read_only"] == true);
  BOOST_TEST(s["actions_enabled"] == false);
  for (auto* path : {"/api/overview", "/api/jobs", "/api/dead-letters",
                     "/api/failures", "/api/audit", "/api/nodes"}) {
    BOOST_TEST(get(p, path).status == 401, path);
    BOOST_TEST(get(p, path, {{"Authorization", bearer}}).status == 200, path);
  }
  // Read-only: every action refused, with the token, saying why.
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, state, run_at) VALUES ('noop', "
          "'scheduled', now() + interval '1 hour')");
  auto id = db.scalar("SELECT max(id) FROM jobs_live");
  for (auto* action : {"retry", "cancel"}) {
    auto r = act(p, "/api/jobs/" + std::to_string(id) + "/" + action);
    BOOST_TEST(r.status == 403, action);
    BOOST_TEST(contains(r.json()["error"].get<std::string>(), "read-only"));
  }
  BOOST_TEST(act(p, "/api/dead-letters/purge", {{"all", true}}).status == 403);
  BOOST_TEST(db.text("SELECT state FROM jobs_live WHERE id = " + std::to_string(id))
             == "scheduled");
  BOOST_TEST(db.scalar("SELECT count(*) FROM audit_log") == 0);
  w->signal(SIGTERM);
  BOOST_TEST(w->wait_exit(60s).value_or(-1) == 0);

  // token_env naming a variable that is not set: the worker does not start.
  worker_timings unset = t;
  unset.env = {};
  port_reservation other;
  unset.extra_toml = http_toml(other.port(), "token_env = \"AW_DASH_UNSET\"\n");
  auto bad = env.start_worker("B", unset);
  auto code = bad->wait_exit(60s);
  BOOST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 2);
  BOOST_TEST(contains(bad->err(), "AW_DASH_UNSET"), bad->err());
}

BOOST_AUTO_TEST_CASE(reads_and_actions_against_real_data) {
  fault_env env{"dash_data"};
  port_reservation http;
  db_session db{env.url()};
  // 60 jobs that complete, a scheduled one, a long one to cancel while it
  // runs, 7 in a queue nobody serves, and dead letters of two causes.
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'noop', '{}' "
          "FROM generate_series(1, 60)");
  db.exec("INSERT INTO jobs_in (kind, state, run_at) VALUES ('noop', "
          "'scheduled', now() + interval '1 hour')");
  auto scheduled = db.scalar("SELECT max(id) FROM jobs_live");
  db.exec("INSERT INTO jobs_in (kind, args, queue) SELECT 'noop', "
          "json_build_object('n', i), 'elsewhere' "
          "FROM generate_series(1, 7) AS i");
  db.exec("INSERT INTO jobs_in (kind, args, max_attempts) SELECT 'fail', "
          "json_build_object('message', 'order ' || i || ' rejected by "
          "''billing-' || i || ''''), 1 FROM generate_series(1, 4) AS i");
  for (int i = 0; i < 3; ++i)
    add_dead_letter(db, "record", "default",
                    "connection to 'db-" + std::to_string(i)
                      + "' refused after " + std::to_string(i + 1) + "s",
                    R"({"ms": 0})");
  worker_timings t;
  t.extra_toml = http_toml(http.port(), "token = \"" + token + "\"\n");
  auto w = env.start_worker("A", t);
  int p = http.port();
  wait_ready(p);
  BOOST_REQUIRE(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
               == 60
             && db.scalar("SELECT count(*) FROM dead_letter_jobs") == 7;
    },
    60s));

  // Queues: the engine's sample, matching the database.
  nlohmann::json overview;
  BOOST_REQUIRE(wait_until(
    [&] {
      overview = get(p, "/api/overview").json();
      if (!overview.is_object())
        return false;
      for (auto& q : overview["queues"])
        if (q["queue"] == "default")
          return q["dead_lettered"] == 7 && q["scheduled"] == 1
                 && q["available"] == 0;
      return false;
    },
    30s));
  std::map<std::string, nlohmann::json> queues;
  for (auto& q : overview["queues"])
    queues[q["queue"].get<std::string>()] = q;
  BOOST_TEST(queues["elsewhere"]["available"] == 7);
  BOOST_TEST(queues["elsewhere"]["oldest_available_age_seconds"].get<double>()
             > 0);
  BOOST_TEST(queues["elsewhere"]["here"].is_null());
  // No node serves "elsewhere": its due jobs are unserved; default's are not.
  BOOST_TEST(queues["elsewhere"]["unserved"] == 7);
  BOOST_TEST(queues["default"]["unserved"] == 0);
  BOOST_TEST(queues["default"]["here"]["concurrency"] == 10);
  BOOST_TEST(queues["default"]["paused"] == false);
  int64_t completed = 0;
  for (auto& n : overview["throughput"]["queues"]["default"]["completed"])
    completed += n.get<int64_t>();
  BOOST_TEST(completed == 60);
  int64_t dead = 0;
  for (auto& n : overview["throughput"]["queues"]["default"]["dead_lettered"])
    dead += n.get<int64_t>();
  BOOST_TEST(dead == 4);
  BOOST_TEST(overview["sample"]["taken_at"].is_number());

  // Jobs: filtered pages match the database.
  auto jobs = get(p, "/api/jobs?state=completed&limit=100").json();
  BOOST_TEST(jobs["jobs"].size() == 60u);
  BOOST_TEST(jobs["next_before"].is_null());
  auto page = get(p, "/api/jobs?state=completed&limit=25").json();
  BOOST_TEST(page["jobs"].size() == 25u);
  auto next = page["next_before"].get<int64_t>();
  auto page2 = get(p, "/api/jobs?state=completed&limit=25&before="
                        + std::to_string(next))
                 .json();
  BOOST_TEST(page2["jobs"][0]["id"].get<int64_t>() < next);
  auto elsewhere = get(p, "/api/jobs?queue=elsewhere").json();
  BOOST_TEST(elsewhere["jobs"].size() == 7u);
  for (auto& j : elsewhere["jobs"]) {
    BOOST_TEST(j["state"] == "available");
    BOOST_TEST(!j.contains("args"));
  }
  BOOST_TEST(get(p, "/api/jobs?kind=fail").json()["jobs"].empty());
  auto one_id = elsewhere["jobs"][0]["id"].get<int64_t>();
  auto one = get(p, "/api/jobs/" + std::to_string(one_id)).json();
  BOOST_TEST(one["job"]["args"]["n"].is_number());
  BOOST_TEST(one["job"]["queue"] == "elsewhere");
  // A dead-lettered job's page has its dead letter.
  auto failed_job = db.scalar("SELECT min(original_job_id) FROM "
                              "dead_letter_jobs WHERE kind = 'fail'");
  auto gone = get(p, "/api/jobs/" + std::to_string(failed_job)).json();
  BOOST_TEST(gone["job"].is_null());
  BOOST_TEST(contains(gone["dead_letter"]["last_error_message"].get<std::string>(),
                      "rejected by 'billing-"));

  // Failures grouped by fingerprint and kind, with counts.
  auto groups = get(p, "/api/failures").json()["groups"];
  BOOST_REQUIRE_EQUAL(groups.size(), 2u);
  BOOST_TEST(groups[0]["kind"] == "fail");
  BOOST_TEST(groups[0]["count"] == 4);
  BOOST_TEST(groups[0]["fingerprint"] == "order <n> rejected by <str>");
  BOOST_TEST(groups[1]["kind"] == "record");
  BOOST_TEST(groups[1]["fingerprint"]
             == "connection to <str> refused after <n>s");
  auto count = get(p, "/api/dead-letters/count?kind=record&fingerprint="
                        "connection%20to%20%3Cstr%3E%20refused%20after%20%3Cn%3Es")
                 .json();
  BOOST_TEST(count["count"] == 3);
  auto listed = get(p, "/api/dead-letters?kind=record&fingerprint="
                         "connection%20to%20%3Cstr%3E%20refused%20after%20%3Cn%3Es")
                  .json();
  BOOST_TEST(listed["dead_letters"].size() == 3u);

  // Retry the group: the jobs run (the record kind writes each run down).
  auto retried = act(p, "/api/dead-letters/retry",
                     {{"kind", "record"},
                      {"fingerprint", "connection to <str> refused after <n>s"}});
  BOOST_TEST(retried.status == 200, retried.body);
  BOOST_TEST(retried.json()["retried"] == 3);
  BOOST_TEST(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM job_executions AS e JOIN jobs_live AS "
                       "j ON j.id = e.job_id WHERE j.state = 'completed' AND "
                       "j.metadata ? 'retried_from_dead_letter'")
             == 3;
    },
    30s));
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 4);

  // One dead letter: retry; another: purge; then the rest by filter.
  auto dl = db.scalar("SELECT min(id) FROM dead_letter_jobs");
  auto r = act(p, "/api/dead-letters/" + std::to_string(dl) + "/retry");
  BOOST_TEST(r.status == 200, r.body);
  auto again = r.json()["jobs"][0]["job_id"].get<int64_t>();
  BOOST_TEST(act(p, "/api/dead-letters/" + std::to_string(dl) + "/retry").status
             == 404);
  // It runs, and fails again (the fail kind, max_attempts 1): a new dead
  // letter of the new job.
  BOOST_TEST(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE "
                       "original_job_id = " + std::to_string(again))
             == 1;
    },
    30s));
  auto dl2 = db.scalar("SELECT max(id) FROM dead_letter_jobs");
  r = act(p, "/api/dead-letters/" + std::to_string(dl2) + "/purge");
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(r.json()["purged"] == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE id = "
                       + std::to_string(dl2))
             == 0);

  // Jobs: retry a completed one (it runs again), cancel a scheduled one,
  // cancel a running one through its worker.
  auto done_id = db.scalar("SELECT min(id) FROM jobs_live WHERE state = "
                           "'completed' AND kind = 'noop'");
  r = act(p, "/api/jobs/" + std::to_string(done_id) + "/retry");
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(r.json()["was"] == "completed");
  BOOST_TEST(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE id = "
                       + std::to_string(done_id)
                       + " AND state = 'completed' AND attempt = 2")
             == 1;
    },
    30s));
  r = act(p, "/api/jobs/" + std::to_string(scheduled) + "/cancel");
  BOOST_TEST(r.status == 200, r.body);
  BOOST_TEST(db.text("SELECT state FROM jobs_live WHERE id = "
                     + std::to_string(scheduled))
             == "cancelled");
  r = act(p, "/api/jobs/" + std::to_string(scheduled) + "/cancel");
  BOOST_TEST(r.status == 409);
  db.exec("INSERT INTO jobs_in (kind, args) VALUES ('sleep', '{\"ms\": 60000}')");
  auto long_id = db.scalar("SELECT max(id) FROM jobs_live");
  BOOST_REQUIRE(wait_until(
    [&] {
      return get(p, "/api/jobs/" + std::to_string(long_id)).json()["job"]["state"]
             == "running";
    },
    30s));
  r = act(p, "/api/jobs/" + std::to_string(long_id) + "/retry");
  BOOST_TEST(r.status == 409, r.body);
  r = act(p, "/api/jobs/" + std::to_string(long_id) + "/cancel");
  BOOST_TEST(r.status == 202, r.body);
  BOOST_TEST(r.json()["cancel_requested"] == true);
  BOOST_TEST(wait_until(
    [&] {
      return db.text("SELECT state FROM jobs_live WHERE id = "
                     + std::to_string(long_id))
             == "cancelled";
    },
    30s));

  // Bulk purge of what is left of the fail group, after counting it.
  auto fail_count = get(p, "/api/dead-letters/count?kind=fail").json()["count"];
  auto purged = act(p, "/api/dead-letters/purge", {{"kind", "fail"}});
  BOOST_TEST(purged.status == 200, purged.body);
  BOOST_TEST(purged.json()["purged"] == fail_count);

  // Every action has its audit row, newest first, through the API too.
  auto audit = get(p, "/api/audit").json()["entries"];
  std::vector<std::string> actions;
  for (auto& a : audit)
    actions.push_back(a["action"].get<std::string>());
  std::vector<std::string> want{"dead_letter.purge", "job.cancel",
                                "job.retry",         "job.cancel",
                                "job.cancel",        "job.retry",
                                "dead_letter.purge", "dead_letter.retry",
                                "dead_letter.retry", "dead_letter.retry"};
  BOOST_TEST(actions == want, nlohmann::json(actions).dump());
  BOOST_TEST(audit[0]["target"]["kind"] == "fail");
  BOOST_TEST(audit[0]["affected"] == fail_count);
  BOOST_TEST(audit.back()["affected"] == 3);
  BOOST_TEST(audit.back()["job_ids"].size() == 3u);
  BOOST_TEST(audit.back()["remote_addr"] == "127.0.0.1");
  BOOST_TEST(contains(audit.back()["worker"].get<std::string>(), "A:"));
  BOOST_TEST(audit[1]["outcome"].get<std::string>().rfind("cancel requested", 0)
             == 0u);

  // Nodes and schedules.
  auto nodes = get(p, "/api/nodes").json();
  BOOST_REQUIRE_EQUAL(nodes["nodes"].size(), 1u);
  BOOST_TEST(nodes["nodes"][0]["queues"][0]["concurrency"] == 10);
  BOOST_TEST(nodes["nodes"][0]["ready"] == true);
  BOOST_TEST(contains(nodes["nodes"][0]["worker_id"].get<std::string>(), "A:"));
  // Every registered process of the cluster: this one, alive.
  BOOST_REQUIRE_EQUAL(nodes["cluster"].size(), 1u);
  BOOST_TEST(nodes["cluster"][0]["worker_id"] == nodes["nodes"][0]["worker_id"]);
  BOOST_TEST(nodes["cluster"][0]["alive"] == true);
  // It is the only process, so it leads.
  BOOST_TEST(nodes["cluster"][0]["leader"] == true);
  BOOST_TEST(nodes["leader"] == nodes["nodes"][0]["worker_id"]);
  auto schedules = get(p, "/api/schedules").json();
  BOOST_TEST(schedules["schedules"].empty());
  BOOST_TEST(!schedules["note"].get<std::string>().empty());
}

BOOST_AUTO_TEST_CASE(queue_pause_and_resume_are_audited_actions) {
  fault_env env{"dash_queue_pause"};
  port_reservation http;
  db_session db{env.url()};
  worker_timings t;
  t.extra_toml = "rate_limit = \"50/s\"\n"  // (inside [queues.default])
                 + http_toml(http.port(), "token = \"" + token + "\"\n");
  auto w = env.start_worker("A", t);
  int p = http.port();
  wait_ready(p);
  // Without the token: refused, nothing changed.
  auto refused = request(p, "POST", "/api/queues/pause",
                         {{"Origin", "http://127.0.0.1:" + std::to_string(p)}},
                         R"({"queue": "default"})", "application/json");
  BOOST_TEST(refused.status == 401);
  // An unknown queue: 404, audited as refused, nothing changed.
  auto unknown = act(p, "/api/queues/pause", {{"queue", "nosuch"}});
  BOOST_TEST(unknown.status == 404);
  BOOST_TEST(contains(unknown.json()["error"].get<std::string>(),
                      "unknown queue 'nosuch'"));
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = "
                       "'nosuch'") == 0);
  BOOST_TEST(act(p, "/api/queues/pause", nlohmann::json::object()).status == 400);

  auto paused = act(p, "/api/queues/pause", {{"queue", "default"}});
  BOOST_TEST(paused.status == 200);
  BOOST_TEST(paused.json()["paused"] == true);
  BOOST_TEST(paused.json()["audit_id"].is_number());
  auto overview = get(p, "/api/overview").json();
  nlohmann::json row;
  for (auto& q : overview["queues"])
    if (q["queue"] == "default")
      row = q;
  BOOST_TEST(row["paused"] == true);
  BOOST_TEST(row["paused_at"].is_string());
  BOOST_TEST(row["rate_limit"] == "50/s");
  BOOST_TEST(row["global_concurrency"].is_null());
  // The worker heard it (by its NOTIFY, or on an idle poll's claim that
  // ran between the commit and the NOTIFY's delivery), and runs nothing of
  // the queue.
  BOOST_TEST(wait_until([&] { return contains(w->err(), "poller[default]: queue paused ("); },
                        10s));
  db.exec("INSERT INTO jobs_in (kind) SELECT 'noop' FROM generate_series(1, 3)");
  std::this_thread::sleep_for(1s);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'") == 3);

  auto resumed = act(p, "/api/queues/resume", {{"queue", "default"}});
  BOOST_TEST(resumed.status == 200);
  BOOST_TEST(resumed.json()["was_paused"] == true);
  BOOST_TEST(wait_until([&] {
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == 3;
  }, 30s));
  auto audit = get(p, "/api/audit").json()["entries"];
  BOOST_REQUIRE(audit.size() == 3u);
  BOOST_TEST(audit[0]["action"] == "queue.resume");
  BOOST_TEST(audit[0]["outcome"] == "resumed");
  BOOST_TEST(audit[0]["target"]["queue"] == "default");
  BOOST_TEST(audit[1]["action"] == "queue.pause");
  BOOST_TEST(audit[1]["outcome"] == "paused");
  BOOST_TEST(audit[2]["outcome"] == "refused: unknown queue");
}

BOOST_AUTO_TEST_CASE(schedules_page_lists_the_periodic_schedules_with_their_runs) {
  fault_env env{"dash_schedules"};
  db_session db{env.url()};
  port_reservation http;
  worker_timings t;
  t.extra_toml = http_toml(http.port(), "")
                 + "[periodic.beat]\ncron = \"* * * * * *\"\nkind = \"noop\"\n"
                   "[periodic.nightly]\ncron = \"30 2 * * *\"\nkind = \"report\"\n"
                   "timezone = \"America/New_York\"\ncatch_up = \"none\"\n";
  // A row left by a schedule no longer in the file.
  db.exec("INSERT INTO periodic_schedules (name, spec, last_tick, last_job_id) "
          "VALUES ('gone', '@daily @ UTC', '2026-01-01T00:00:00Z', 7)");
  auto w = env.start_worker("A", t);
  wait_ready(http.port());
  BOOST_REQUIRE(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE metadata->>'periodic' = 'beat'") > 0;
    },
    60s));
  auto data = get(http.port(), "/api/schedules").json();
  auto& list = data["schedules"];
  BOOST_REQUIRE_EQUAL(list.size(), 3u);
  BOOST_TEST(list[0]["name"] == "beat");
  BOOST_TEST(list[0]["configured"] == true);
  BOOST_TEST(list[0]["cron"] == "* * * * * *");
  BOOST_TEST(list[0]["kind"] == "noop");
  BOOST_TEST(list[0]["last_tick"].is_string());
  BOOST_TEST(list[0]["last_job_id"].get<int64_t>()
             == db.scalar("SELECT last_job_id FROM periodic_schedules WHERE name = 'beat'"));
  BOOST_TEST(list[0]["next_tick"].is_string());
  BOOST_TEST(list[1]["name"] == "nightly");
  BOOST_TEST(list[1]["timezone"] == "America/New_York");
  BOOST_TEST(list[1]["catch_up"] == "none");
  BOOST_TEST(list[1]["last_tick"].is_null());
  BOOST_TEST(list[2]["name"] == "gone");
  BOOST_TEST(list[2]["configured"] == false);
  BOOST_TEST(list[2]["last_tick"] == "2026-01-01T00:00:00Z");
  BOOST_TEST(list[2]["next_tick"].is_null());
  BOOST_TEST(!data["note"].get<std::string>().empty());
  // The removed schedule is not enqueued.
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE metadata->>'periodic' = 'gone'") == 0);
}

BOOST_AUTO_TEST_CASE(dashboard_off_serves_the_probes_only) {
  fault_env env{"dash_off"};
  port_reservation http;
  worker_timings t;
  t.extra_toml = http_toml(http.port(), "dashboard = false\n");
  auto w = env.start_worker("A", t);
  wait_ready(http.port());
  BOOST_TEST(get(http.port(), "/").status == 404);
  BOOST_TEST(get(http.port(), "/api/overview").status == 404);
  BOOST_TEST(get(http.port(), "/metrics").status == 200);
  // The generic 404 carries the security headers too.
  auto missing = get(http.port(), "/nope");
  BOOST_TEST(missing.status == 404);
  BOOST_TEST(missing.header("X-Content-Type-Options") == "nosniff");
  BOOST_TEST(missing.header("X-Frame-Options") == "DENY");
  BOOST_TEST(contains(missing.header("Content-Security-Policy"),
                      "frame-ancestors 'none'"));
}

BOOST_AUTO_TEST_SUITE_END()
