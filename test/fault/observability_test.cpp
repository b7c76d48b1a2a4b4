// The HTTP endpoint of a real worker process ([http] listen): /readyz
// through a database outage and a drain; /metrics checked by promtool and
// against the database; a real Prometheus server scraping the worker and
// answering a query; the shipped alert rules and Grafana board checked by
// promtool and against the metrics a worker exports.

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fault_fixture.hpp"
#include "support/prometheus_text.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

namespace {

struct http_answer {
  int status = 0;
  std::string body;
};

/// GET http://127.0.0.1:PORT/PATH; status 0 when nothing answers.
http_answer get(int port, const std::string& path) {
  httplib::Client client{"127.0.0.1", port};
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get(path.c_str());
  if (!res)
    return {};
  return {res->status, res->body};
}

std::string http_toml(int port) {
  return "\n[http]\nlisten = \"127.0.0.1:" + std::to_string(port)
         + "\"\n[metrics]\nqueue_stats_interval = \"200ms\"\n";
}

double value_of(const std::string& scrape, const std::string& series) {
  return aw_test::metric_value(scrape, series);
}

/// Runs a shell command; its exit code and output (stdout and stderr).
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  BOOST_REQUIRE_MESSAGE(p != nullptr, "cannot run " << command);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// Metric names (families) a scrape declares with # TYPE.
std::set<std::string> families_of(const std::string& scrape) {
  std::set<std::string> out;
  std::istringstream in{scrape};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("# TYPE ", 0) == 0)
      out.insert(line.substr(7, line.find(' ', 7) - 7));
  return out;
}

/// Every actor_worker_* name `text` mentions, as its family (without the
/// histogram suffixes).
std::set<std::string> metric_names_in(const std::string& text) {
  std::set<std::string> out;
  std::regex name{R"(actor_worker_[a-z_]+)"};
  for (auto i = std::sregex_iterator(text.begin(), text.end(), name);
       i != std::sregex_iterator(); ++i) {
    auto n = i->str();
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      std::string s{suffix};
      if (n.size() > s.size()
          && n.compare(n.size() - s.size(), s.size(), s) == 0) {
        n.resize(n.size() - s.size());
        break;
      }
    }
    out.insert(n);
  }
  return out;
}

std::string source_file(const std::string& relative) {
  return std::string{AW_SOURCE_DIR} + "/" + relative;
}

} // namespace

BOOST_AUTO_TEST_SUITE(observability_test)

BOOST_AUTO_TEST_CASE(readyz_follows_a_database_outage_and_a_drain) {
  fault_env env{"readyz"};
  port_reservation http;
  worker_timings t;
  t.shutdown_drain = "20s";
  t.extra_toml = http_toml(http.port());
  auto w = env.start_worker("A", t);
  BOOST_REQUIRE_MESSAGE(
    wait_until([&] { return get(http.port(), "/readyz").status == 200; }, 30s),
    "/readyz never answered 200: " << get(http.port(), "/readyz").body);
  BOOST_TEST(get(http.port(), "/healthz").body == R"({"status":"ok"})");

  // The database goes away: not ready, but alive (a restart would not
  // help), and the body says why.
  env.cluster().stop();
  BOOST_REQUIRE(wait_until(
    [&] { return get(http.port(), "/readyz").status == 503; }, 30s));
  auto down = nlohmann::json::parse(get(http.port(), "/readyz").body);
  BOOST_TEST(down["ready"] == false);
  BOOST_TEST(down["reasons"].dump() == R"(["database unreachable"])");
  BOOST_TEST(get(http.port(), "/healthz").status == 200);
  BOOST_TEST(value_of(get(http.port(), "/metrics").body,
                      "actor_worker_database_up{database=\"default\"}")
             == 0);

  // It comes back: ready again without a restart.
  env.cluster().start();
  BOOST_REQUIRE(wait_until(
    [&] { return get(http.port(), "/readyz").status == 200; }, 60s));
  BOOST_TEST(w->running());

  // A drain: not ready from the moment it starts, while the running job
  // finishes.
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, args) VALUES ('sleep', '{\"ms\": 3000}')");
  // Its handler started (claimed is not enough: a buffered job is
  // released at a drain).
  BOOST_REQUIRE(wait_until(
    [&] {
      return value_of(get(http.port(), "/metrics").body,
                      "actor_worker_jobs_running{queue=\"default\"}")
             == 1;
    },
    30s));
  w->signal(SIGTERM);
  BOOST_REQUIRE(wait_until(
    [&] { return get(http.port(), "/readyz").status == 503; }, 10s));
  auto draining = nlohmann::json::parse(get(http.port(), "/readyz").body);
  BOOST_TEST(draining["reasons"].dump()
             == R"(["draining: the node is stopping"])");
  BOOST_TEST(get(http.port(), "/healthz").status == 200);
  auto code = w->wait_exit(60s);
  BOOST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
             == 1);
  // The endpoint went with the process.
  BOOST_TEST(get(http.port(), "/healthz").status == 0);
}

BOOST_AUTO_TEST_CASE(metrics_pass_promtool_and_match_the_database) {
  fault_env env{"metrics"};
  port_reservation http;
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'noop', '{}' "
          "FROM generate_series(1, 300)");
  db.exec("INSERT INTO jobs_in (kind, args, max_attempts) SELECT 'fail', "
          "'{\"message\": \"no <b>luck</b>\\nsecond line\"}', 1 "
          "FROM generate_series(1, 2)");
  db.exec("INSERT INTO jobs_in (kind, args, run_at) SELECT 'noop', '{}', "
          "now() + interval '1 hour' FROM generate_series(1, 5)");
  db.exec("INSERT INTO jobs_in (kind, args, queue) SELECT 'noop', '{}', "
          "'elsewhere' FROM generate_series(1, 3)");
  worker_timings t;
  t.extra_toml = http_toml(http.port());
  auto w = env.start_worker("A", t);
  BOOST_REQUIRE(wait_until(
    [&] {
      return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
               == 300
             && db.scalar("SELECT count(*) FROM dead_letter_jobs") == 2;
    },
    60s));
  // Wait for a sample taken after the last outcome.
  std::string m;
  BOOST_REQUIRE(wait_until(
    [&] {
      m = get(http.port(), "/metrics").body;
      return value_of(m, "actor_worker_dead_letter_jobs{queue=\"default\"}")
               == 2
             && value_of(m, "actor_worker_queue_jobs{queue=\"default\",state=\"available\"}")
                  == 0;
    },
    30s));

  auto file = env.dir() + "/metrics.txt";
  std::ofstream{file} << m;
  auto [code, out] = shell("promtool check metrics < " + file);
  BOOST_TEST(code == 0, "promtool check metrics: " << out);

  // Counters of this node's runs.
  BOOST_TEST(value_of(m, "actor_worker_job_executions_total{kind=\"noop\",outcome=\"completed\",queue=\"default\"}") == 300);
  BOOST_TEST(value_of(m, "actor_worker_job_executions_total{kind=\"fail\",outcome=\"dead_lettered\",queue=\"default\"}") == 2);
  BOOST_TEST(value_of(m, "actor_worker_jobs_started_total{kind=\"noop\",queue=\"default\"}") == 300);
  BOOST_TEST(value_of(m, "actor_worker_job_queue_wait_seconds_count{queue=\"default\"}") == 302);
  BOOST_TEST(value_of(m, "actor_worker_claim_batch_size_sum{queue=\"default\"}") == 302);
  // Gauges sampled from the database, matching it, for queues this node
  // does not serve too.
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"default\",state=\"scheduled\"}") == 5);
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"elsewhere\",state=\"available\"}") == 3);
  BOOST_TEST(value_of(m, "actor_worker_queue_oldest_job_age_seconds{queue=\"elsewhere\"}") > 0);
  // No node serves "elsewhere"; default's kinds are this node's.
  BOOST_TEST(value_of(m, "actor_worker_queue_unserved_jobs{queue=\"elsewhere\"}") == 3);
  BOOST_TEST(value_of(m, "actor_worker_queue_unserved_jobs{queue=\"default\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_queue_concurrency_limit{queue=\"default\"}") == 10);
  // No error text, args or ids in the labels.
  BOOST_TEST(!contains(m, "luck"));
  BOOST_TEST(!contains(m, "job_id"));

  // The alert rules and the dashboard query only what a worker exports.
  auto exported = families_of(m);
  for (auto* doc : {"docs/prometheus/alerts.yml",
                    "docs/grafana/actor-worker.json"}) {
    auto text = slurp(source_file(doc));
    BOOST_REQUIRE_MESSAGE(!text.empty(), doc << " is missing");
    auto names = metric_names_in(text);
    BOOST_TEST(!names.empty());
    for (auto& name : names)
      BOOST_TEST(exported.count(name) == 1u,
                 doc << " uses " << name << ", which a worker does not export");
  }
  auto dashboard = nlohmann::json::parse(
    slurp(source_file("docs/grafana/actor-worker.json")));
  BOOST_TEST(dashboard.at("panels").size() >= 6u);
}

BOOST_AUTO_TEST_CASE(a_real_prometheus_scrapes_a_worker) {
  fault_env env{"prometheus"};
  port_reservation http;
  port_reservation prom_port;
  db_session db{env.url()};
  db.exec("INSERT INTO jobs_in (kind, args) SELECT 'noop', '{}' "
          "FROM generate_series(1, 50)");
  worker_timings t;
  t.extra_toml = http_toml(http.port());
  auto w = env.start_worker("A", t);

  auto config = env.dir() + "/prometheus.yml";
  std::ofstream{config} << "global:\n"
                        << "  scrape_interval: 1s\n"
                        << "  evaluation_interval: 1s\n"
                        << "rule_files:\n"
                        << "  - " << source_file("docs/prometheus/alerts.yml")
                        << "\n"
                        << "scrape_configs:\n"
                        << "  - job_name: actor-worker\n"
                        << "    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << http.port()
                        << "']\n";
  auto listen = "127.0.0.1:" + std::to_string(prom_port.port());
  worker_process prometheus{
    "prometheus",
    {"--config.file=" + config, "--storage.tsdb.path=" + env.dir() + "/tsdb",
     "--web.listen-address=" + listen, "--log.level=warn"},
    env.url(),
    env.dir(),
    {},
    "/usr/bin/prometheus"};
  // One series back through Prometheus's HTTP API: the completed runs.
  std::string answer;
  bool found = wait_until(
    [&] {
      auto r = get(prom_port.port(),
                   "/api/v1/query?query=sum(actor_worker_job_executions_total"
                   "%7Boutcome%3D%22completed%22%7D)");
      answer = r.body;
      if (r.status != 200)
        return false;
      auto j = nlohmann::json::parse(r.body);
      auto& result = j["data"]["result"];
      return !result.empty()
             && std::stod(result[0]["value"][1].get<std::string>()) == 50;
    },
    60s, 500ms);
  BOOST_TEST(found, "Prometheus never returned 50 completed runs: "
                      << answer << "\n" << prometheus.err());
  // The shipped rules loaded and evaluate without errors.
  auto rules = get(prom_port.port(), "/api/v1/rules");
  BOOST_TEST(rules.status == 200);
  BOOST_TEST(contains(rules.body, "ActorWorkerQueueBacklogOld"), rules.body);
  BOOST_TEST(!contains(rules.body, "\"health\":\"err\""), rules.body);
}

BOOST_AUTO_TEST_SUITE_END()
