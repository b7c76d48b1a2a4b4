// [http], [metrics] and [log] settings; the metrics the Prometheus observer
// exports for what the actors report; readiness; the text and JSON log
// formats (one line per event, control characters escaped, job fields).

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "actor_worker/actors/job_log.hpp"
#include "actor_worker/app/log_format.hpp"
#include "actor_worker/app/prometheus_observer.hpp"
#include "actor_worker/config/config.hpp"
#include "support/prometheus_text.hpp"
#include "unit/config_errors.hpp"

using namespace std::chrono_literals;

namespace {

using aw_test::contains;

std::string error_of(const std::string& text) {
  return aw_test::config_error_of(text);
}

double value_of(const std::string& scrape, const std::string& series) {
  return aw_test::metric_value(scrape, series);
}

/// The series of metric `name` in `scrape`: their `queue` label value ->
/// the sum of their values.
std::map<std::string, double> by_queue_label(const std::string& scrape,
                                             const std::string& name) {
  std::map<std::string, double> out;
  std::istringstream in{scrape};
  std::string line;
  const std::regex series{"([a-z_]+)\\{(.*)\\} (.*)"};
  const std::regex queue{"queue=\"([^\"]*)\""};
  std::smatch m;
  std::smatch q;
  while (std::getline(in, line))
    if (std::regex_match(line, m, series) && m[1] == name) {
      auto labels = m[2].str();
      if (std::regex_search(labels, q, queue))
        out[q[1]] += std::stod(m[3]);
    }
  return out;
}

aw::job_outcome outcome(aw::outcome_kind kind, const std::string& queue,
                        const std::string& job_kind, int64_t ms) {
  aw::job_outcome o;
  o.job_id = 1;
  o.kind = kind;
  o.queue = queue;
  o.job_kind = job_kind;
  o.duration_ms = ms;
  return o;
}

/// Captures the default logger's lines in a string for one test.
struct captured_log {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  captured_log() {
    auto logger = std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  ~captured_log() {
    spdlog::set_default_logger(previous);
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out_lines;
    std::istringstream in{out.str()};
    std::string line;
    while (std::getline(in, line))
      out_lines.push_back(line);
    return out_lines;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(observability_test)

BOOST_AUTO_TEST_CASE(http_metrics_and_log_sections_are_read_and_checked) {
  auto cfg = aw::parse_config("[http]\nlisten = \"127.0.0.1:9464\"\n"
                              "[metrics]\nqueue_stats_interval = \"5s\"\n"
                              "max_metric_queues = 7\n"
                              "[log]\nformat = \"json\"\n",
                              "worker.toml");
  BOOST_TEST(cfg.http.listen == "127.0.0.1:9464");
  BOOST_TEST(cfg.http.host() == "127.0.0.1");
  BOOST_TEST(cfg.http.port() == 9464);
  BOOST_TEST(cfg.metrics.queue_stats_interval.count() == 5000);
  BOOST_TEST(cfg.metrics.max_metric_queues == 7);
  BOOST_TEST(cfg.log.format == "json");
  auto v6 = aw::parse_config("[http]\nlisten = \"[::1]:80\"\n", "worker.toml");
  BOOST_TEST(v6.http.host() == "::1");
  // Off by default; text logs; a sample every 15 s.
  auto defaults = aw::parse_config("", "worker.toml");
  BOOST_TEST(defaults.http.listen.empty());
  BOOST_TEST(defaults.log.format == "text");
  BOOST_TEST(defaults.metrics.queue_stats_interval.count() == 15000);
  BOOST_TEST(defaults.metrics.max_metric_queues == 100);
  auto negative = error_of("[metrics]\nmax_metric_queues = -1\n");
  BOOST_TEST(contains(negative, "metrics.max_metric_queues"), negative);

  auto bad_port = error_of("[http]\nlisten = \"127.0.0.1:99999\"\n");
  BOOST_TEST(contains(bad_port, "worker.toml:2"), bad_port);
  BOOST_TEST(contains(bad_port, "http.listen"), bad_port);
  BOOST_TEST(contains(bad_port, "1 to 65535"), bad_port);
  auto no_port = error_of("[http]\nlisten = \"localhost\"\n");
  BOOST_TEST(contains(no_port, "HOST:PORT"), no_port);
  auto format = error_of("\n[log]\nformat = \"xml\"\n");
  BOOST_TEST(contains(format, "worker.toml:3"), format);
  BOOST_TEST(contains(format, "log.format"), format);
  auto unknown = error_of("[http]\nport = 1\n");
  BOOST_TEST(contains(unknown, "http.port"), unknown);
}

BOOST_AUTO_TEST_CASE(outcomes_count_by_queue_kind_and_where_the_job_went) {
  aw::prometheus_observer obs{{"email"}, {"mail"}, "1.2.3"};
  obs.started("mail", "email", 0.25);
  obs.started("mail", "email", -1); // wait unknown: not observed
  obs.recorded(outcome(aw::outcome_kind::completed, "mail", "email", 1500),
               aw::execution_result::completed);
  obs.recorded(outcome(aw::outcome_kind::retryable_failure, "mail", "email", 2),
               aw::execution_result::retried);
  obs.claimed("mail", 7);
  obs.slots("mail", 3, 10);
  auto m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_jobs_started_total{kind=\"email\",queue=\"mail\"}") == 2);
  BOOST_TEST(value_of(m, "actor_worker_job_executions_total{kind=\"email\",outcome=\"completed\",queue=\"mail\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_job_executions_total{kind=\"email\",outcome=\"retried\",queue=\"mail\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_job_executions_total{kind=\"email\",outcome=\"dead_lettered\",queue=\"mail\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_job_duration_seconds_count{kind=\"email\",queue=\"mail\"}") == 2);
  BOOST_TEST(value_of(m, "actor_worker_job_duration_seconds_sum{kind=\"email\",queue=\"mail\"}") == 1.502);
  BOOST_TEST(value_of(m, "actor_worker_job_queue_wait_seconds_count{queue=\"mail\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_claim_batch_size_sum{queue=\"mail\"}") == 7);
  BOOST_TEST(value_of(m, "actor_worker_jobs_running{queue=\"mail\"}") == 3);
  BOOST_TEST(value_of(m, "actor_worker_queue_free_slots{queue=\"mail\"}") == 7);
  BOOST_TEST(value_of(m, "actor_worker_queue_concurrency_limit{queue=\"mail\"}") == 10);
  BOOST_TEST(value_of(m, "actor_worker_build_info{version=\"1.2.3\"}") == 1);
  // Nothing unbounded becomes a label: no job id, no error text.
  BOOST_TEST(!contains(m, "job_id"));
}

BOOST_AUTO_TEST_CASE(kinds_this_node_does_not_run_are_labelled_other) {
  aw::prometheus_observer obs{{"email"}, {"mail"}, "1"};
  aw::rescued_job r;
  r.id = 9;
  r.kind = "some-random-kind-42";
  r.queue = "mail";
  r.dead_lettered = true;
  obs.rescued(r);
  obs.hooks_failed("email", 2);
  obs.database_error("claim");
  obs.follow_ups_failed("rescue");
  auto m = obs.scrape();
  BOOST_TEST(!contains(m, "some-random-kind-42"));
  BOOST_TEST(value_of(m, "actor_worker_jobs_rescued_total{dead_lettered=\"true\",kind=\"other\",queue=\"mail\",reason=\"stale_heartbeat\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_hook_failures_total{kind=\"email\"}") == 2);
  BOOST_TEST(value_of(m, "actor_worker_database_errors_total{operation=\"claim\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_follow_up_failures_total{stage=\"rescue\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_follow_up_failures_total{stage=\"outcome\"}") == 0);
  // Bounded series exist at 0 before anything happened (rate() sees their
  // first increase).
  BOOST_TEST(value_of(m, "actor_worker_database_errors_total{operation=\"heartbeat\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_jobs_started_total{kind=\"email\",queue=\"mail\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_jobs_rescued_total{dead_lettered=\"false\",kind=\"email\",queue=\"mail\",reason=\"expired_callback\"}") == 0);
}

BOOST_AUTO_TEST_CASE(a_queue_gone_from_the_sample_reads_zero) {
  aw::prometheus_observer obs{{}, {}, "1"};
  aw::queue_sample a;
  a.queue = "a";
  a.available = 5;
  a.scheduled = 2;
  a.running = 1;
  a.dead_lettered = 4;
  a.oldest_available_age_seconds = 12.5;
  obs.sampled({a});
  auto m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"a\",state=\"available\"}") == 5);
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"a\",state=\"scheduled\"}") == 2);
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"a\",state=\"running\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_dead_letter_jobs{queue=\"a\"}") == 4);
  BOOST_TEST(value_of(m, "actor_worker_queue_oldest_job_age_seconds{queue=\"a\"}") == 12.5);
  obs.sampled({});
  m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"a\",state=\"available\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_queue_oldest_job_age_seconds{queue=\"a\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_dead_letter_jobs{queue=\"a\"}") == 0);
}

BOOST_AUTO_TEST_CASE(unserved_jobs_are_a_gauge_per_queue) {
  aw::prometheus_observer obs{{}, {"mail"}, "1"};
  obs.leadership(true);
  aw::queue_sample a;
  a.queue = "mail";
  a.available = 5;
  a.unserved = 3;
  aw::queue_sample b;
  b.queue = "reports";
  b.available = 2;
  obs.sampled({a, b});
  auto m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_queue_unserved_jobs{queue=\"mail\"}") == 3);
  BOOST_TEST(value_of(m, "actor_worker_queue_unserved_jobs{queue=\"reports\"}") == 0);
  // Served again (or deleted): 0, like the other sampled gauges.
  obs.sampled({b});
  m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_queue_unserved_jobs{queue=\"mail\"}") == 0);
  // No longer leading: the series go with the other sampled ones.
  obs.sampled({a, b});
  obs.leadership(false);
  m = obs.scrape();
  BOOST_TEST(!contains(m, "actor_worker_queue_unserved_jobs{"));
  BOOST_TEST(!contains(m, "actor_worker_queue_jobs{"));
}

BOOST_AUTO_TEST_CASE(queue_labels_are_bounded_and_the_rest_add_up_in_other) {
  // A configured queue that sorts after every sampled one still has its
  // label; 1,000 queues inserted by SQL give at most the cap more.
  const int cap = aw::defaults::max_metric_queues;
  aw::prometheus_observer obs{{"noop"}, {"zz-mine"}, "1"};
  obs.leadership(true);
  aw::queue_samples samples;
  int64_t available = 0;
  int64_t dead = 0;
  int64_t unserved = 0;
  double oldest_past_cap = 0;
  for (int i = 0; i < 1000; ++i) {
    aw::queue_sample q;
    char name[16];
    std::snprintf(name, sizeof name, "q%04d", i);
    q.queue = name;
    q.available = i % 7 + 1;
    q.scheduled = 1;
    q.dead_lettered = i % 3;
    q.unserved = i % 2;
    q.oldest_available_age_seconds = i;
    available += q.available;
    dead += q.dead_lettered;
    unserved += q.unserved;
    if (i >= cap)
      oldest_past_cap = std::max(oldest_past_cap, q.oldest_available_age_seconds);
    samples.push_back(q);
  }
  aw::queue_sample mine;
  mine.queue = "zz-mine";
  mine.available = 4;
  available += 4;
  samples.push_back(mine);
  obs.sampled(samples);
  auto m = obs.scrape();
  auto jobs = by_queue_label(m, "actor_worker_queue_jobs");
  BOOST_TEST(jobs.size() <= static_cast<size_t>(cap) + 1 + 1);
  BOOST_TEST(jobs.count("zz-mine") == 1u);
  BOOST_TEST(jobs.count("q0000") == 1u);
  BOOST_TEST(jobs.count("other") == 1u);
  BOOST_TEST(jobs.count("q0999") == 0u);
  for (auto* family : {"actor_worker_queue_oldest_job_age_seconds",
                       "actor_worker_dead_letter_jobs",
                       "actor_worker_queue_unserved_jobs"})
    BOOST_TEST(by_queue_label(m, family).size() == jobs.size(), family);
  // The sums add up; the oldest age of "other" is its queues' largest.
  double exported = 0;
  for (auto& [label, v] : by_queue_label(m, "actor_worker_queue_jobs"))
    exported += v;
  BOOST_TEST(exported == static_cast<double>(available + 1000)); // + scheduled
  double exported_dead = 0;
  for (auto& [label, v] : by_queue_label(m, "actor_worker_dead_letter_jobs"))
    exported_dead += v;
  BOOST_TEST(exported_dead == static_cast<double>(dead));
  double exported_unserved = 0;
  for (auto& [label, v] : by_queue_label(m, "actor_worker_queue_unserved_jobs"))
    exported_unserved += v;
  BOOST_TEST(exported_unserved == static_cast<double>(unserved));
  BOOST_TEST(value_of(m, "actor_worker_queue_oldest_job_age_seconds{queue=\"other\"}")
             == oldest_past_cap);
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"zz-mine\",state=\"available\"}") == 4);
  // A rescue in a queue past the cap is counted under "other" too; one
  // with a label keeps it.
  aw::rescued_job r;
  r.kind = "noop";
  r.queue = "q0500";
  obs.rescued(r);
  r.queue = "q0001";
  obs.rescued(r);
  m = obs.scrape();
  BOOST_TEST(!contains(m, "q0500"));
  BOOST_TEST(value_of(m, "actor_worker_jobs_rescued_total{dead_lettered=\"false\",kind=\"noop\",queue=\"other\",reason=\"stale_heartbeat\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_jobs_rescued_total{dead_lettered=\"false\",kind=\"noop\",queue=\"q0001\",reason=\"stale_heartbeat\"}") == 1);
  // New names later do not get labels either: the set is bounded for the
  // life of the process; the labelled queues keep theirs.
  aw::queue_sample late;
  late.queue = "a-late-one";
  late.available = 9;
  obs.sampled({late});
  m = obs.scrape();
  BOOST_TEST(!contains(m, "a-late-one"));
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"other\",state=\"available\"}") == 9);
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"q0000\",state=\"available\"}") == 0);
  BOOST_TEST(by_queue_label(m, "actor_worker_queue_jobs").size() <= static_cast<size_t>(cap) + 2);
}

BOOST_AUTO_TEST_CASE(ready_needs_the_database_the_schema_and_no_drain) {
  aw::prometheus_observer obs{{}, {}, "1"};
  auto r = obs.ready();
  BOOST_TEST(!r.ready);
  BOOST_TEST(r.reasons.size() == 2u); // not reached, not checked yet
  obs.database_reachable(true);
  obs.schema_checked(true);
  BOOST_TEST(obs.ready().ready);
  BOOST_TEST(contains(obs.scrape(), "actor_worker_ready 1"));
  BOOST_TEST(contains(obs.scrape(), "actor_worker_database_up{database=\"default\"} 1"));
  obs.database_reachable(false);
  r = obs.ready();
  BOOST_TEST(!r.ready);
  BOOST_TEST(r.to_json().dump() == R"({"ready":false,"reasons":["database unreachable"]})");
  BOOST_TEST(contains(obs.scrape(), "actor_worker_database_up{database=\"default\"} 0"));
  obs.database_reachable(true);
  obs.draining();
  BOOST_TEST(obs.ready().reasons.at(0) == "draining: the node is stopping");
  aw::prometheus_observer outdated{{}, {}, "1"};
  outdated.database_reachable(true);
  outdated.schema_checked(false);
  BOOST_TEST(contains(outdated.ready().reasons.at(0), "actor-worker migrate"));
}

BOOST_AUTO_TEST_CASE(each_database_has_its_own_health_leader_and_samples) {
  // Shared, as the runtime holds it: each database's view keeps it alive.
  auto shared = std::make_shared<aw::prometheus_observer>(
    std::vector<std::string>{}, std::vector<std::string>{"a", "b"}, "1",
    std::vector<std::string>{"default", "orders"});
  auto& obs = *shared;
  auto main_db = obs.for_database("default");
  auto orders = obs.for_database("orders");
  main_db->database_reachable(true);
  main_db->schema_checked(true);
  BOOST_TEST(!obs.ready().ready); // orders: not reached, not checked
  orders->database_reachable(true);
  orders->schema_checked(true);
  BOOST_TEST(obs.ready().ready);
  // One database down: not ready, and the reason names it.
  orders->database_reachable(false);
  auto r = obs.ready();
  BOOST_TEST(!r.ready);
  BOOST_TEST(r.to_json().dump()
             == R"json({"ready":false,"reasons":["database unreachable (database 'orders')"]})json");
  auto m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_database_up{database=\"default\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_database_up{database=\"orders\"}") == 0);
  // Each database's own readiness (the dashboard's view of one); none for
  // a database this node does not work with.
  BOOST_REQUIRE(obs.ready_of("default").has_value());
  BOOST_TEST(obs.ready_of("default")->ready);
  BOOST_REQUIRE(obs.ready_of("orders").has_value());
  BOOST_TEST(obs.ready_of("orders")->to_json().dump()
             == R"json({"ready":false,"reasons":["database unreachable (database 'orders')"]})json");
  BOOST_TEST(!obs.ready_of("billing").has_value());
  // Leadership and samples are per database: stepping down in one drops
  // only that database's queue series.
  main_db->leadership(true);
  orders->leadership(true);
  aw::queue_sample a;
  a.queue = "a";
  a.available = 3;
  aw::queue_sample b;
  b.queue = "b";
  b.available = 7;
  main_db->sampled({a});
  orders->sampled({b});
  BOOST_TEST(obs.latest_sample().queues.size() == 2u);
  BOOST_REQUIRE(obs.latest_sample("orders").queues.size() == 1u);
  BOOST_TEST(obs.latest_sample("orders").queues[0].queue == "b");
  BOOST_TEST(obs.latest_sample("orders").taken.has_value());
  BOOST_TEST(!obs.latest_sample("billing").taken.has_value());
  m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_leader{database=\"orders\"}") == 1);
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"b\",state=\"available\"}") == 7);
  orders->leadership(false);
  m = obs.scrape();
  BOOST_TEST(value_of(m, "actor_worker_leader{database=\"orders\"}") == 0);
  BOOST_TEST(value_of(m, "actor_worker_leader{database=\"default\"}") == 1);
  BOOST_TEST(!contains(m, "actor_worker_queue_jobs{queue=\"b\""));
  BOOST_TEST(value_of(m, "actor_worker_queue_jobs{queue=\"a\",state=\"available\"}") == 3);
  BOOST_REQUIRE(obs.latest_sample().queues.size() == 1u);
  BOOST_TEST(obs.latest_sample().queues[0].queue == "a");
  BOOST_TEST(!obs.latest_sample("orders").taken.has_value());
  BOOST_TEST(obs.latest_sample("default").queues.size() == 1u);
}

BOOST_AUTO_TEST_CASE(json_lines_carry_the_job_and_escape_everything) {
  captured_log log;
  aw::configure_log_format({"json"});
  std::string kind = "email";
  aw::log_job(spdlog::level::warn, aw::job_ref{42, kind, "mail", 3},
              "job {} failed: {}", 42, "line one\nline two \x1b[31m");
  spdlog::info("no job here \"quoted\"");
  auto lines = log.lines();
  BOOST_REQUIRE(lines.size() == 2u);
  auto first = nlohmann::json::parse(lines[0]);
  BOOST_TEST(first["level"] == "warning");
  BOOST_TEST(first["message"] == "job 42 failed: line one\nline two \x1b[31m");
  BOOST_TEST(first["job_id"] == 42);
  BOOST_TEST(first["kind"] == "email");
  BOOST_TEST(first["queue"] == "mail");
  BOOST_TEST(first["attempt"] == 3);
  BOOST_TEST(std::regex_match(first["time"].get<std::string>(),
                              std::regex{R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"}));
  // The raw line holds no control character: the newline and ESC are
  // JSON escapes.
  BOOST_TEST(contains(lines[0], "line one\\nline two \\u001b[31m"));
  auto second = nlohmann::json::parse(lines[1]);
  BOOST_TEST(second["message"] == "no job here \"quoted\"");
  BOOST_TEST(!second.contains("job_id"));
}

BOOST_AUTO_TEST_CASE(text_lines_escape_control_characters) {
  captured_log log;
  aw::configure_log_format({"text"});
  spdlog::error("bad input: {}", "a\nb\r\x01");
  spdlog::info("plain line");
  auto lines = log.lines();
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(contains(lines[0], "[error] bad input: a\\nb\\r\\x01"), lines[0]);
  BOOST_TEST(contains(lines[1], "[info] plain line"), lines[1]);
}

BOOST_AUTO_TEST_SUITE_END()
