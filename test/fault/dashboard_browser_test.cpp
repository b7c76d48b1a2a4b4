// The dashboard in a real browser: headless Chromium (Debian chromium,
// chromium-driver) over WebDriver against a running worker with real data.
// The queue counts on the page match the database, the page refreshes
// itself, a filter narrows the job list, a job's page shows its error, an
// action without the token is refused, a dead letter retried from the page
// runs, a failure group is retried after the page shows how many, the
// audit log shows the actions, and hostile content (<script> in a kind,
// queue, args and error) renders as text with no Content-Security-Policy
// violation. Screenshots go to the test's directory and to
// AW_ARTIFACT_DIR (the build's test-artifacts/), whence docs/dashboard.png.

#include <boost/test/unit_test.hpp>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "dashboard_support.hpp"
#include "fault_fixture.hpp"
#include "webdriver.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;
using namespace aw::fault::dash;

namespace {

/// Where screenshots are kept for a look after the run: AW_ARTIFACT_DIR
/// (set by ctest), else only the test's own directory.
std::string artifact_dir() {
  auto d = std::getenv("AW_ARTIFACT_DIR");
  if (d == nullptr || *d == '\0')
    return {};
  std::filesystem::create_directories(d);
  return d;
}

void snap(webdriver& browser, fault_env& env, const std::string& name) {
  browser.screenshot(env.dir() + "/" + name);
  auto dir = artifact_dir();
  if (!dir.empty())
    std::filesystem::copy_file(env.dir() + "/" + name, dir + "/" + name,
                               std::filesystem::copy_options::overwrite_existing);
}

/// What the queues page shows: queue -> state -> count (data-value).
const char* const read_queue_table = R"(
  const out = {};
  for (const tr of document.querySelectorAll('#queues tbody tr[data-queue]')) {
    const row = {};
    for (const s of ['available', 'scheduled', 'running', 'waiting_external', 'dead_lettered']) {
      const td = tr.querySelector('.c-' + s);
      row[s] = td ? Number(td.dataset.value) : -1;
    }
    out[tr.dataset.queue] = row;
  }
  return out;
)";

/// The database's answer to the same question, as the engine's sample
/// defines it (due jobs are available, jobs not due yet scheduled).
nlohmann::json queue_counts(db_session& db) {
  nlohmann::json out = nlohmann::json::object();
  auto rows = db.query(
    "SELECT queue, "
    " count(*) FILTER (WHERE state IN ('available', 'scheduled') "
    "                  AND run_at <= now()), "
    " count(*) FILTER (WHERE state IN ('available', 'scheduled') "
    "                  AND run_at > now()), "
    " count(*) FILTER (WHERE state = 'running'), "
    " count(*) FILTER (WHERE state = 'waiting_external') "
    "FROM jobs_live GROUP BY queue");
  for (const auto& r : rows)
    out[r[0].as<std::string>()] = {{"available", r[1].as<int64_t>()},
                                   {"scheduled", r[2].as<int64_t>()},
                                   {"running", r[3].as<int64_t>()},
                                   {"waiting_external", r[4].as<int64_t>()},
                                   {"dead_lettered", 0}};
  for (const auto& r :
       db.query("SELECT queue, count(*) FROM dead_letter_jobs GROUP BY 1")) {
    auto& q = out[r[0].as<std::string>()];
    if (q.is_null())
      q = {{"available", 0}, {"scheduled", 0}, {"running", 0},
           {"waiting_external", 0}};
    q["dead_lettered"] = r[1].as<int64_t>();
  }
  // Queues with nothing live and no dead letter are not in the sample.
  for (auto it = out.begin(); it != out.end();) {
    bool any = false;
    for (auto& [k, v] : it.value().items())
      any = any || v.get<int64_t>() > 0;
    it = any ? std::next(it) : out.erase(it);
  }
  return out;
}

/// The page's rows restricted to the queues the database has.
nlohmann::json page_counts(webdriver& b) {
  return b.js(read_queue_table);
}

bool counts_match(webdriver& b, db_session& db, nlohmann::json* page,
                  nlohmann::json* want) {
  *want = queue_counts(db);
  *page = page_counts(b);
  for (auto& [queue, counts] : want->items())
    if (!page->contains(queue) || (*page)[queue] != counts)
      return false;
  return true;
}

std::string js_string(const std::string& s) {
  return nlohmann::json(s).dump();
}

/// `s` percent-encoded for a URL (as encodeURIComponent does).
std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

const std::string hostile_kind = "<script>window.__pwned='kind'</script>";
const std::string hostile_queue = "<b>q</b><img src=x onerror=\"window.__pwned='queue'\">";
const std::string hostile_error = "<script>window.__pwned='error'</script> boom <i>now</i>";
const std::string hostile_args = R"({"html": "<img src=x onerror=\"window.__pwned='args'\">", "s": "<script>window.__pwned='args2'</script>"})";

} // namespace

BOOST_AUTO_TEST_SUITE(dashboard_browser_test)

BOOST_AUTO_TEST_CASE(the_dashboard_in_a_real_browser) {
  fault_env env{"dash_browser"};
  port_reservation http;
  db_session db{env.url()};
  // Real work: noop jobs, short sleeps in a second queue, two long runs,
  // a backlog in a queue nobody serves, scheduled jobs, a flaky job that
  // fails once then completes, and failures of two causes.
  db.exec("INSERT INTO jobs_in (kind) SELECT 'noop' FROM generate_series(1, 300)");
  db.exec("INSERT INTO jobs_in (kind, queue, args) SELECT 'sleep', 'mail', "
          "'{\"ms\": 200}' FROM generate_series(1, 40)");
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'sleep', '{\"ms\": 600000}' "
          "FROM generate_series(1, 2)");
  db.exec("INSERT INTO jobs_in (kind, queue, args) SELECT 'noop', 'reports', "
          "json_build_object('day', i) FROM generate_series(1, 120) AS i");
  db.exec("INSERT INTO jobs_in (kind, queue, state, run_at) SELECT 'noop', "
          "'reports', 'scheduled', now() + interval '2 hours' "
          "FROM generate_series(1, 5)");
  db.exec("INSERT INTO jobs_in (kind, args) VALUES ('fail', '{\"times\": 1, "
          "\"message\": \"upstream 502 from billing-7, will retry\"}')");
  auto flaky = db.scalar("SELECT max(id) FROM jobs_live");
  // Work spread over a minute, some of it failing once: the throughput
  // chart shows bars over several intervals (the picture in docs/).
  db.exec("INSERT INTO jobs_in (kind, state, run_at) SELECT 'noop', 'scheduled', "
          "now() + make_interval(secs => 5 + i * 0.2 + 8 * sin(i / 20.0)) "
          "FROM generate_series(1, 200) AS i");
  db.exec("INSERT INTO jobs_in (kind, args, state, run_at) SELECT 'fail', "
          "'{\"times\": 1, \"message\": \"upstream 503\"}', 'scheduled', "
          "now() + make_interval(secs => 5 + i * 1.5) "
          "FROM generate_series(1, 30) AS i");
  db.exec("INSERT INTO jobs_in (kind, args, max_attempts) SELECT 'fail', "
          "json_build_object('message', 'payment ' || (1000 + i) || ' declined "
          "by ''gateway-' || i || ''''), 1 FROM generate_series(1, 6) AS i");
  db.exec("INSERT INTO jobs_in (kind, queue, args, max_attempts) SELECT 'fail', "
          "'mail', json_build_object('message', 'SMTP timeout after ' || i || "
          "'s talking to 10.0.0.' || i), 1 FROM generate_series(1, 3) AS i");
  add_dead_letter(db, "record", "mail", "connection to 'db-1' refused",
                  R"({"ms": 0})");
  auto to_retry = db.scalar("SELECT max(id) FROM dead_letter_jobs");

  worker_timings t;
  t.concurrency = 4;
  t.extra_toml = http_toml(http.port(), "token = \"" + token + "\"\n")
                 + "\n[queues.mail]\nconcurrency = 2\n"
                 // A schedule that does not tick during the test (its
                 // jobs would change the counts above).
                   "\n[periodic.yearly_report]\ncron = \"0 3 1 1 *\"\n"
                   "kind = \"report\"\n";
  auto w = env.start_worker("A", t);
  const std::string base = "http://127.0.0.1:" + std::to_string(http.port());
  BOOST_REQUIRE(wait_until(
    [&] { return get(http.port(), "/readyz").status == 200; }, 60s));
  BOOST_REQUIRE_MESSAGE(
    wait_until(
      [&] {
        return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
                 == 300 + 40 + 1 + 200 + 30
               && db.scalar("SELECT count(*) FROM dead_letter_jobs") == 10
               && db.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                            "'running'")
                    == 2;
      },
      240s, 250ms),
    "the work did not settle: "
      << db.describe("SELECT json_agg(x) FROM (SELECT state, count(*) FROM "
                     "jobs GROUP BY state) AS x"));

  webdriver browser{env.dir()};

  // -- the queues page matches the database, and refreshes itself ---------
  browser.open(base + "/#/queues");
  BOOST_REQUIRE_MESSAGE(
    browser.wait_js("return document.querySelector('#queues tbody "
                    "tr[data-queue=\"reports\"]') !== null;"),
    "the queues page did not load: " << browser.js("return document.body.innerText;"));
  nlohmann::json page, want;
  BOOST_TEST(wait_until([&] { return counts_match(browser, db, &page, &want); },
                        60s, 500ms),
             "page " << page.dump() << " vs database " << want.dump());
  BOOST_TEST(page["reports"]["available"] == 120);
  BOOST_TEST(page["reports"]["scheduled"] == 5);
  BOOST_TEST(page["default"]["running"] == 2);
  BOOST_TEST(page["default"]["dead_lettered"] == 6);
  BOOST_TEST(page["mail"]["dead_lettered"] == 4);
  auto first_load = browser.js("return document.getElementById('main').dataset.loaded;");
  BOOST_TEST(browser.wait_js("return document.getElementById('main').dataset.loaded !== "
                             + js_string(first_load.get<std::string>()) + ";",
                             30s),
             "the page did not refresh itself");
  // The chart is drawn (Chart.js, compiled in).
  BOOST_TEST(browser.js("return typeof window.Chart === 'function' && "
                        "document.getElementById('throughput-chart').width > 0;")
             == true);
  // Give the chart's bars a moment, then the picture for the docs (docs/dashboard.png).
  browser.resize(1400, 1050);
  browser.wait_js("return document.querySelector('#queues tbody tr') !== null;");
  snap(browser, env, "dashboard-queues.png");

  // From here on the test drives the page; the refresh would replace the
  // elements it is about to click.
  browser.click("#live");
  BOOST_TEST(browser.js("return document.getElementById('live').checked;")
             == false);

  // -- a filter narrows the job list -----------------------------------------
  browser.open(base + "/#/jobs");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelectorAll('#jobs tbody tr[data-id]').length === 50;"));
  BOOST_TEST(browser.js("return new Set([...document.querySelectorAll("
                        "'#jobs .c-queue')].map(e => e.textContent)).size;")
               .get<int>()
             >= 1);
  browser.type("#filter-queue", "reports");
  browser.click("#filter-state option[value=\"scheduled\"]");
  browser.click("#filter-apply");
  BOOST_REQUIRE(browser.wait_js(
    "return location.hash.includes('queue=reports') && "
    "document.querySelectorAll('#jobs tbody tr[data-id]').length === 5;"));
  BOOST_TEST(browser.js("return [...document.querySelectorAll('#jobs "
                        "tbody tr[data-id]')].every(tr => tr.querySelector("
                        "'.c-queue').textContent === 'reports' && "
                        "tr.querySelector('.c-state').textContent === "
                        "'scheduled');")
             == true);
  snap(browser, env, "dashboard-jobs-filtered.png");

  // -- a job's page shows its error ----------------------------------------
  browser.open(base + "/#/job/" + std::to_string(flaky));
  BOOST_REQUIRE(browser.wait_js(
    "return document.getElementById('job-error') !== null;"));
  BOOST_TEST(browser.js("return document.getElementById('job-error').textContent;")
             == "upstream 502 from billing-7, will retry");
  BOOST_TEST(contains(browser.js("return document.getElementById('job-args')"
                                 ".textContent;")
                        .get<std::string>(),
                      "\"times\": 1"));
  BOOST_TEST(browser.js("return document.querySelector('#main h1 .badge')"
                        ".textContent;")
             == "completed");
  snap(browser, env, "dashboard-job.png");

  // -- an action without the token is refused -------------------------------
  browser.open(base + "/#/dead-letter/" + std::to_string(to_retry));
  BOOST_REQUIRE(browser.wait_js("return document.getElementById('dl-retry') !== null;"));
  BOOST_TEST(browser.js("return sessionStorage.length;") == 0);
  browser.click("#dl-retry");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelector('#action-result .result') !== null;"));
  BOOST_TEST(browser.js("return document.querySelector('#action-result .result')"
                        ".dataset.status;")
             == "401");
  BOOST_TEST(contains(browser.js("return document.querySelector('#action-result')"
                                 ".textContent;")
                        .get<std::string>(),
                      "refused"));
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE id = "
                       + std::to_string(to_retry))
             == 1);
  snap(browser, env, "dashboard-refused.png");

  // -- with the token, a dead letter retried from the page runs ------------
  browser.type("#token-input", token);
  browser.click("#token-save");
  BOOST_REQUIRE(browser.wait_js(
    "return document.getElementById('token-state') !== null && "
    "document.getElementById('token-state').textContent === 'token set';"));
  // Kept for the tab's session only, and never in a cookie or the URL.
  BOOST_TEST(browser.js("return sessionStorage.getItem('actor-worker.token');")
             == token);
  BOOST_TEST(browser.js("return document.cookie;") == "");
  BOOST_TEST(!contains(browser.js("return location.href;").get<std::string>(),
                       token));
  browser.open(base + "/#/dead-letters?queue=mail&kind=record");
  auto row_button = "button.dl-retry[data-id=\"" + std::to_string(to_retry) + "\"]";
  BOOST_REQUIRE(browser.wait_js("return document.querySelector("
                                + js_string(row_button) + ") !== null;"));
  browser.click(row_button);
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelector('tr[data-id=\"" + std::to_string(to_retry)
    + "\"] .result') !== null;"));
  BOOST_TEST(browser.js("return document.querySelector('tr[data-id=\""
                        + std::to_string(to_retry) + "\"] .result').dataset.status;")
             == "200");
  BOOST_TEST(wait_until(
               [&] {
                 return db.scalar(
                          "SELECT count(*) FROM job_executions AS e JOIN jobs_live AS j "
                          "ON j.id = e.job_id WHERE j.state = 'completed' AND "
                          "(j.metadata -> 'retried_from_dead_letter' ->> "
                          "'dead_letter_id')::bigint = "
                          + std::to_string(to_retry))
                        == 1;
               },
               60s),
             "the retried dead letter did not run");

  // -- retry a failure group, after the page shows how many -----------------
  browser.open(base + "/#/failures");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelectorAll('#failures tbody tr[data-kind]').length >= 2;"));
  auto groups = browser.js(
    "return [...document.querySelectorAll('#failures tbody tr[data-kind]')].map("
    "tr => ({kind: tr.dataset.kind, count: Number(tr.querySelector('.c-count')"
    ".dataset.value), fingerprint: tr.querySelector('.c-fingerprint').textContent}));");
  BOOST_REQUIRE(groups.size() >= 2u);
  BOOST_TEST(groups[0]["count"] == 6);
  BOOST_TEST(groups[0]["fingerprint"] == "payment <n> declined by <str>");
  BOOST_TEST(groups[1]["count"] == 3);
  BOOST_TEST(groups[1]["fingerprint"] == "SMTP timeout after <n>s talking to <n>");
  snap(browser, env, "dashboard-failures.png");
  browser.click("button.group-retry[data-index=\"1\"]");
  BOOST_REQUIRE(browser.wait_js("return document.getElementById('confirm-yes') !== null;"));
  BOOST_TEST(contains(browser.js("return document.querySelector('.confirm p')"
                                 ".textContent;")
                        .get<std::string>(),
                      "Retry 3 dead letter(s) matching kind = fail, fingerprint "
                      "= SMTP timeout after <n>s talking to <n>?"));
  BOOST_TEST(browser.js("return document.getElementById('confirm-yes').textContent;")
             == "Retry 3");
  browser.click("#confirm-yes");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelector('#action-result .result.ok') !== null;"));
  BOOST_TEST(browser.js("return document.querySelector('#action-result .result')"
                        ".textContent;")
             == "Retried 3 dead letter(s).");
  // They run again (and fail again: max_attempts 1).
  BOOST_TEST(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM dead_letter_jobs WHERE queue = "
                       "'mail' AND metadata ? 'retried_from_dead_letter'")
             == 3;
    },
    60s));

  // -- the audit log shows the actions --------------------------------------
  browser.open(base + "/#/audit");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelectorAll('#audit tbody tr[data-id]').length === 2;"));
  auto audit = browser.js("return [...document.querySelectorAll('#audit tbody "
                          "tr[data-id]')].map(tr => tr.querySelector("
                          "'.c-action').textContent + ' ' + tr.querySelector("
                          "'.c-affected').textContent);");
  BOOST_TEST(audit.dump() == R"(["dead_letter.retry 3","dead_letter.retry 1"])");
  BOOST_TEST(db.scalar("SELECT count(*) FROM audit_log WHERE user_agent LIKE "
                       "'%Chrome%'")
             == 2);
  snap(browser, env, "dashboard-audit.png");

  // -- hostile content renders as text --------------------------------------
  add_dead_letter(db, hostile_kind, hostile_queue, hostile_error, hostile_args);
  db.exec("INSERT INTO jobs_in (kind, queue, args) VALUES (" + db.quote(hostile_kind)
          + ", " + db.quote(hostile_queue) + ", " + db.quote(hostile_args)
          + "::jsonb)");
  auto hostile_job = db.scalar("SELECT max(id) FROM jobs_live");
  db.exec("INSERT INTO jobs_in (kind, state, finalized_at, last_error_message) "
          "VALUES ('noop', 'completed', now(), " + db.quote(hostile_error) + ")");
  auto no_markup = std::string{
    "return document.querySelectorAll('#main script, #main img, #main b, "
    "#main i').length === 0 && window.__pwned === undefined;"};

  // The page draws the queues of the sample (the refresh is off now): wait
  // for a sample that has the hostile queue.
  BOOST_REQUIRE(wait_until(
    [&] {
      return contains(get(http.port(), "/api/overview").body, "onerror");
    },
    30s));
  browser.open(base + "/#/queues");
  BOOST_REQUIRE(browser.wait_js("return document.querySelector('#queues tbody tr"
                                "[data-queue=' + CSS.escape(" + js_string(hostile_queue)
                                + ") + ']') !== null;"));
  BOOST_TEST(browser.js(no_markup) == true);

  browser.open(base + "/#/jobs?queue=" + url_encode(hostile_queue));
  BOOST_REQUIRE(browser.wait_js("return document.querySelector('#jobs tbody "
                                "tr[data-id=\"" + std::to_string(hostile_job)
                                + "\"]') !== null;"));
  BOOST_TEST(browser.js("return document.querySelector('tr[data-id=\""
                        + std::to_string(hostile_job) + "\"] .c-kind').textContent;")
             == hostile_kind);
  BOOST_TEST(browser.js("return document.querySelector('tr[data-id=\""
                        + std::to_string(hostile_job) + "\"] .c-queue').textContent;")
             == hostile_queue);
  BOOST_TEST(browser.js(no_markup) == true);

  browser.open(base + "/#/job/" + std::to_string(hostile_job));
  BOOST_REQUIRE(browser.wait_js("return document.getElementById('job-args') !== null;"));
  BOOST_TEST(contains(browser.js("return document.getElementById('job-args')"
                                 ".textContent;")
                        .get<std::string>(),
                      "<script>window.__pwned='args2'</script>"));
  BOOST_TEST(browser.js(no_markup) == true);

  browser.open(base + "/#/jobs?state=completed&kind=noop");
  BOOST_REQUIRE(browser.wait_js("return [...document.querySelectorAll('#jobs "
                                ".c-error')].some(e => e.textContent === "
                                + js_string(hostile_error) + ");"));
  BOOST_TEST(browser.js(no_markup) == true);

  browser.open(base + "/#/dead-letters");
  BOOST_REQUIRE(browser.wait_js("return [...document.querySelectorAll('#dead-letters "
                                ".c-kind')].some(e => e.textContent === "
                                + js_string(hostile_kind) + ");"));
  BOOST_TEST(browser.js("return [...document.querySelectorAll('#dead-letters "
                        ".c-error')].some(e => e.textContent === "
                        + js_string(hostile_error) + ");")
             == true);
  BOOST_TEST(browser.js(no_markup) == true);
  snap(browser, env, "dashboard-hostile.png");

  browser.open(base + "/#/failures");
  BOOST_REQUIRE(browser.wait_js("return [...document.querySelectorAll('#failures "
                                ".c-kind')].some(e => e.textContent === "
                                + js_string(hostile_kind) + ");"));
  BOOST_TEST(browser.js(no_markup) == true);
  // And nothing tried to run inline script or load anything else.
  BOOST_TEST(browser.js("return window.__awCspViolations.length;") == 0,
             browser.js("return window.__awCspViolations;").dump());

  // Nodes and schedules render.
  browser.open(base + "/#/nodes");
  BOOST_REQUIRE(browser.wait_js("return document.getElementById('node-worker-id') !== null;"));
  auto worker_id = browser.js("return document.getElementById('node-worker-id')"
                              ".textContent;")
                     .get<std::string>();
  BOOST_TEST(contains(worker_id, "A:"));
  // The cluster's table lists this process, alive.
  BOOST_TEST(browser.js("const tr = [...document.querySelectorAll('#cluster "
                        "tbody tr')].find(tr => tr.dataset.worker === "
                        + js_string(worker_id)
                        + "); return tr ? tr.querySelector('.c-alive')"
                          ".textContent : null;")
             == "alive");
  // The only process leads: its row carries the badge, the page names it.
  BOOST_TEST(browser.js("const tr = [...document.querySelectorAll('#cluster "
                        "tbody tr')].find(tr => tr.dataset.worker === "
                        + js_string(worker_id)
                        + "); return tr !== undefined && "
                          "tr.querySelector('.badge.leader') !== null;")
             == true);
  BOOST_TEST(contains(browser.js("return document.getElementById('leader')"
                                 ".textContent;")
                        .get<std::string>(),
                      worker_id));
  browser.open(base + "/#/schedules");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelector('#schedules tr[data-name=\"yearly_report\"]') !== null;"));
  BOOST_TEST(browser.js("return document.querySelector('#schedules tr[data-name="
                        "\"yearly_report\"] .c-cron').textContent;")
             == "0 3 1 1 *");
  BOOST_TEST(contains(browser.js("return document.querySelector('#schedules "
                                 "tr[data-name=\"yearly_report\"] .c-next')"
                                 ".textContent;")
                        .get<std::string>(),
                      "-01-01 03:00:00"));
  BOOST_TEST(browser.js("return document.querySelector('#schedules tr[data-name="
                        "\"yearly_report\"] .c-last').textContent;")
             == "never");
}

BOOST_AUTO_TEST_CASE(a_queue_is_paused_and_resumed_from_the_queues_page) {
  fault_env env{"dash_browser_pause"};
  port_reservation http;
  db_session db{env.url()};
  worker_timings t;
  t.extra_toml = "global_concurrency = 5\n"  // (inside [queues.default])
                 + http_toml(http.port(), "token = \"" + token + "\"\n");
  auto w = env.start_worker("A", t);
  const std::string base = "http://127.0.0.1:" + std::to_string(http.port());
  BOOST_REQUIRE(wait_until(
    [&] { return get(http.port(), "/readyz").status == 200; }, 60s));
  webdriver browser{env.dir()};
  browser.open(base + "/#/queues");
  const std::string row = "#queues tbody tr[data-queue=\"default\"]";
  BOOST_REQUIRE(browser.wait_js("return document.querySelector("
                                + js_string(row + " .c-paused") + ") !== null;"));
  BOOST_TEST(browser.js("return document.querySelector(" + js_string(row + " .c-paused")
                        + ").textContent;") == "no");
  BOOST_TEST(browser.js("return document.querySelector(" + js_string(row + " .c-limits")
                        + ").textContent;") == "at most 5 at once");
  browser.type("#token-input", token);
  browser.click("#token-save");
  BOOST_REQUIRE(browser.wait_js(
    "return document.getElementById('token-state') !== null;"));
  browser.open(base + "/#/queues");
  const std::string pause = "button.queue-pause[data-queue=\"default\"]";
  BOOST_REQUIRE(browser.wait_js("return document.querySelector(" + js_string(pause)
                                + ") !== null && !document.querySelector("
                                + js_string(pause) + ").disabled;"));
  // The page redraws its table on a timer: a click that lands as the
  // button is replaced does nothing, so click again until it asks.
  bool asked = false;
  for (int attempt = 0; attempt < 6 && !asked; ++attempt) {
    browser.click(pause);
    asked = browser.wait_js("return document.getElementById('confirm-yes') !== null;",
                            std::chrono::seconds{10});
  }
  BOOST_REQUIRE_MESSAGE(asked, "the pause button never asked for a confirmation");
  browser.click("#confirm-yes");
  BOOST_REQUIRE_MESSAGE(
    browser.wait_js("return document.querySelector(" + js_string(row + " .c-paused")
                    + ") !== null && document.querySelector("
                    + js_string(row + " .c-paused") + ").textContent === 'yes';",
                    30s),
    "the page did not show the pause: " << browser.js("return document.body.innerText;"));
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = "
                       "'default' AND paused") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM audit_log WHERE action = "
                       "'queue.pause' AND outcome = 'paused'") == 1);
  // By its NOTIFY, or on an idle poll's claim that ran between the commit
  // and the NOTIFY's delivery (seen once in CI).
  BOOST_TEST(wait_until([&] { return contains(w->err(), "poller[default]: queue paused ("); },
                        10s));
  snap(browser, env, "dashboard-queue-paused.png");
  const std::string resume = "button.queue-resume[data-queue=\"default\"]";
  BOOST_REQUIRE(browser.wait_js("return document.querySelector(" + js_string(resume)
                                + ") !== null;"));
  // (As for the pause: a click as the table redraws does nothing.)
  bool resumed = false;
  for (int attempt = 0; attempt < 3 && !resumed; ++attempt) {
    if (!browser.find(resume).empty())
      browser.click(resume);
    resumed = browser.wait_js("return document.querySelector(" + js_string(row + " .c-paused")
                              + ") !== null && document.querySelector("
                              + js_string(row + " .c-paused") + ").textContent === 'no';",
                              10s);
  }
  BOOST_REQUIRE_MESSAGE(resumed, "the queue never showed as resumed");
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = "
                       "'default' AND NOT paused") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM audit_log WHERE action = "
                       "'queue.resume' AND outcome = 'resumed'") == 1);
  // Jobs of the resumed queue run.
  db.exec("INSERT INTO jobs_in (kind) SELECT 'noop' FROM generate_series(1, 5)");
  BOOST_TEST(wait_until([&] {
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == 5;
  }, 30s));
}

BOOST_AUTO_TEST_CASE(protected_reads_ask_for_the_token) {
  fault_env env{"dash_browser_protected"};
  port_reservation http;
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, queue) SELECT 'noop', 'reports' "
          "FROM generate_series(1, 3)");
  worker_timings t;
  t.extra_toml = http_toml(http.port(), "token = \"" + token
                                          + "\"\nprotect_reads = true\n");
  auto w = env.start_worker("A", t);
  const std::string base = "http://127.0.0.1:" + std::to_string(http.port());
  BOOST_REQUIRE(wait_until(
    [&] { return get(http.port(), "/readyz").status == 200; }, 60s));
  webdriver browser{env.dir()};
  browser.open(base + "/#/queues");
  BOOST_REQUIRE(browser.wait_js("return document.getElementById('needs-token') !== null;"));
  BOOST_TEST(browser.js("return document.querySelector('#queues') === null;") == true);
  snap(browser, env, "dashboard-needs-token.png");
  browser.type("#token-input", token);
  browser.click("#token-save");
  BOOST_REQUIRE(browser.wait_js(
    "return document.querySelector('#queues tbody tr[data-queue=\"reports\"]') !== null;"));
  // A reload in the same tab keeps the token (sessionStorage).
  browser.open(base + "/#/jobs");
  BOOST_TEST(browser.wait_js(
    "return document.querySelectorAll('#jobs tbody tr[data-id]').length === 3;"));
  BOOST_TEST(browser.js("return document.cookie;") == "");
  // Forgetting it hides the data again.
  browser.click("#token-forget");
  BOOST_TEST(browser.wait_js("return document.getElementById('needs-token') !== null;"));
}

BOOST_AUTO_TEST_SUITE_END()
