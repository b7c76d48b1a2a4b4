#include <boost/test/unit_test.hpp>

#include "actor_worker/config/config.hpp"
#include "unit/config_errors.hpp"

using namespace std::chrono_literals;
using aw_test::contains;

namespace {

std::string error_of(const std::string& text) {
  return aw_test::config_error_of(text);
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_test)

BOOST_AUTO_TEST_CASE(parses_durations_in_ms_s_m_h) {
  BOOST_TEST(aw::parse_duration("250ms").count() == 250);
  BOOST_TEST(aw::parse_duration("2s").count() == 2000);
  BOOST_TEST(aw::parse_duration("1.5s").count() == 1500);
  BOOST_TEST(aw::parse_duration("5m").count() == 300000);
  BOOST_TEST(aw::parse_duration("24h").count() == 86400000);
  BOOST_TEST(aw::parse_duration("0").count() == 0);
  BOOST_CHECK_THROW(aw::parse_duration("2"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration("2 weeks"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration("s"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration(""), std::invalid_argument);
  // One decimal point at most, with digits on both sides.
  BOOST_CHECK_THROW(aw::parse_duration("1.5.5s"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration("1.s"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration(".5s"), std::invalid_argument);
  // Up to 36,500 days; beyond, timers and deadlines would overflow.
  BOOST_TEST(aw::parse_duration("36500d").count()
             == aw::defaults::max_duration.count());
  BOOST_CHECK_THROW(aw::parse_duration("36501d"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration("116000d"), std::invalid_argument);
  BOOST_CHECK_THROW(aw::parse_duration("99999999999999999999h"),
                    std::invalid_argument);
  try {
    aw::parse_duration("116000d");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string{e.what()}.find("maximum of 36500d")
               != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(empty_file_gives_defaults_and_the_default_queue) {
  auto cfg = aw::parse_config("", "worker.toml");
  BOOST_TEST(cfg.database.pool_size == aw::defaults::pool_size);
  BOOST_TEST(cfg.worker.max_retries == 20);
  BOOST_TEST(cfg.worker.poll_interval.count() == 1000);
  BOOST_TEST(cfg.worker.shutdown_drain.count() == 2000);
  BOOST_REQUIRE_EQUAL(cfg.queues.size(), 1u);
  BOOST_TEST(cfg.queues[0].name == "default");
  BOOST_TEST(cfg.queues[0].concurrency == 10);
  // Dead letters are kept until retried or purged.
  BOOST_TEST(cfg.worker.dead_letter_retention.count() == 0);
}

BOOST_AUTO_TEST_CASE(reads_every_documented_key) {
  auto cfg = aw::parse_config(R"(
[database]
url = "postgresql://u@h/db"
pool_size = 6
transactional_pool_size = 3
transaction_timeout = "5s"
[worker]
node = "node-a"
poll_interval = "250ms"
max_retries = 5
shutdown_drain = "3s"
completed_retention = "0"
dead_letter_retention = "30d"
maintenance_interval = "10s"
[queues.default]
concurrency = 12
[queues.email]
concurrency = 3
)",
                              "worker.toml");
  BOOST_TEST(cfg.database.url == "postgresql://u@h/db");
  BOOST_TEST(cfg.database.pool_size == 6);
  BOOST_TEST(cfg.database.transactional_pool_size == 3);
  BOOST_TEST(cfg.database.transaction_timeout.count() == 5000);
  BOOST_TEST(cfg.worker.node == "node-a");
  BOOST_TEST(cfg.worker.poll_interval.count() == 250);
  BOOST_TEST(cfg.worker.max_retries == 5);
  BOOST_TEST(cfg.worker.shutdown_drain.count() == 3000);
  BOOST_TEST(cfg.worker.completed_retention.count() == 0);
  BOOST_TEST(cfg.worker.dead_letter_retention.count()
             == int64_t{30} * 24 * 3600 * 1000);
  BOOST_TEST(cfg.worker.maintenance_interval.count() == 10000);
  BOOST_REQUIRE_EQUAL(cfg.queues.size(), 2u);
}

BOOST_AUTO_TEST_CASE(unknown_key_names_file_line_and_key) {
  auto msg = error_of("[worker]\nnode = \"a\"\npol_interval = \"1s\"\n");
  BOOST_TEST(contains(msg, "worker.toml:3"), msg);
  BOOST_TEST(contains(msg, "worker.pol_interval"), msg);
  BOOST_TEST(contains(msg, "unknown key"), msg);
}

BOOST_AUTO_TEST_CASE(wrong_type_names_file_line_and_key) {
  auto msg = error_of("[queues.default]\nconcurrency = \"ten\"\n");
  BOOST_TEST(contains(msg, "worker.toml:2"), msg);
  BOOST_TEST(contains(msg, "queues.default.concurrency"), msg);
  BOOST_TEST(contains(msg, "integer"), msg);
}

BOOST_AUTO_TEST_CASE(bad_duration_names_file_line_key_and_value) {
  auto msg = error_of("\n[worker]\nshutdown_drain = \"2 secs\"\n");
  BOOST_TEST(contains(msg, "worker.toml:3"), msg);
  BOOST_TEST(contains(msg, "worker.shutdown_drain"), msg);
  BOOST_TEST(contains(msg, "2 secs"), msg);
}

BOOST_AUTO_TEST_CASE(out_of_range_values_are_rejected) {
  BOOST_TEST(contains(error_of("[queues.default]\nconcurrency = 0\n"),
                      "out of range"));
  BOOST_TEST(contains(error_of("[worker]\npoll_interval = \"0\"\n"),
                      "worker.poll_interval"));
  BOOST_TEST(contains(error_of("[worker]\nmax_retries = -1\n"),
                      "worker.max_retries"));
}

BOOST_AUTO_TEST_CASE(lease_keys_have_the_spec_defaults_and_are_read) {
  auto defaults = aw::parse_config("", "worker.toml");
  BOOST_TEST(defaults.worker.heartbeat_interval.count() == 30000);
  BOOST_TEST(defaults.worker.reclaim_window.count() == 120000);
  BOOST_TEST(defaults.worker.idle_poll_permits == 0);
  BOOST_TEST(defaults.queues[0].deadline.count() == 0);
  auto cfg = aw::parse_config(R"(
[worker]
heartbeat_interval = "1s"
reclaim_window = "3s"
idle_poll_permits = 2
[queues.default]
deadline = "5m"
)",
                              "worker.toml");
  BOOST_TEST(cfg.worker.heartbeat_interval.count() == 1000);
  BOOST_TEST(cfg.worker.reclaim_window.count() == 3000);
  BOOST_TEST(cfg.worker.idle_poll_permits == 2);
  BOOST_TEST(cfg.queues[0].deadline.count() == 300000);
}

BOOST_AUTO_TEST_CASE(reclaim_window_below_three_heartbeats_is_rejected) {
  auto msg = error_of("[worker]\nheartbeat_interval = \"30s\"\n"
                      "reclaim_window = \"60s\"\n");
  BOOST_TEST(contains(msg, "worker.reclaim_window"), msg);
  BOOST_TEST(contains(msg, "3 x worker.heartbeat_interval"), msg);
  BOOST_TEST(contains(msg, "worker.toml"), msg);
  BOOST_TEST(contains(error_of("[worker]\nidle_poll_permits = -1\n"),
                      "worker.idle_poll_permits"));
  BOOST_TEST(contains(error_of("[queues.default]\ndeadline = \"soon\"\n"),
                      "queues.default.deadline"));
}

BOOST_AUTO_TEST_CASE(every_error_points_at_the_line_of_its_key) {
  // A cross-key check names the line of the key it is about.
  auto msg = error_of("[worker]\nheartbeat_interval = \"30s\"\n"
                      "reclaim_window = \"60s\"\n");
  BOOST_TEST(contains(msg, "worker.toml:3: key 'worker.reclaim_window'"), msg);
  // A value check points at the value, not at the [worker] header.
  msg = error_of("[worker]\nnode = \"n1\"\npoll_interval = \"0\"\n");
  BOOST_TEST(contains(msg, "worker.toml:3: key 'worker.poll_interval'"), msg);
}

BOOST_AUTO_TEST_CASE(a_file_that_never_ends_is_refused_not_read_whole) {
  try {
    aw::load_config("/dev/zero");
    BOOST_FAIL("/dev/zero was accepted");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "/dev/zero: the configuration file is larger than 1024 KiB"),
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(local_buffer_and_scheduler_keys_have_defaults_and_are_read) {
  auto defaults = aw::parse_config("", "worker.toml");
  BOOST_TEST(defaults.worker.local_queue_size == aw::defaults::local_queue_size);
  BOOST_TEST(defaults.worker.local_queue_bytes
             == aw::defaults::local_queue_bytes);
  BOOST_TEST(defaults.queues[0].local_queue_size == 0); // the worker's
  BOOST_TEST(defaults.scheduler.threads == 0);
  BOOST_TEST(defaults.scheduler.policy == "sharing");
  auto cfg = aw::parse_config(R"(
[worker]
local_queue_size = 500
local_queue_bytes = "8MiB"
[scheduler]
threads = 3
policy = "stealing"
[queues.big]
local_queue_size = 20
local_queue_bytes = 1048576
)",
                              "worker.toml");
  BOOST_TEST(cfg.worker.local_queue_size == 500);
  BOOST_TEST(cfg.worker.local_queue_bytes == int64_t{8} << 20);
  BOOST_TEST(cfg.scheduler.threads == 3);
  BOOST_TEST(cfg.scheduler.policy == "stealing");
  BOOST_REQUIRE_EQUAL(cfg.queues.size(), 1u);
  BOOST_TEST(cfg.queues[0].local_queue_size == 20);
  BOOST_TEST(cfg.queues[0].local_queue_bytes == 1048576);
  BOOST_TEST(aw::parse_size("512KiB") == 512 * 1024);
  BOOST_TEST(aw::parse_size("1GiB") == int64_t{1} << 30);
  BOOST_CHECK_THROW(aw::parse_size("lots"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(bad_local_buffer_and_scheduler_values_name_the_key) {
  auto size = error_of("[worker]\nlocal_queue_bytes = \"64 apples\"\n");
  BOOST_TEST(contains(size, "worker.toml:2"), size);
  BOOST_TEST(contains(size, "worker.local_queue_bytes"), size);
  BOOST_TEST(contains(error_of("[queues.default]\nlocal_queue_size = 0\n"),
                      "queues.default.local_queue_size"));
  auto policy = error_of("[scheduler]\npolicy = \"fair\"\n");
  BOOST_TEST(contains(policy, "scheduler.policy"), policy);
  BOOST_TEST(contains(policy, "fair"), policy);
  BOOST_TEST(contains(error_of("[scheduler]\nthreads = -2\n"),
                      "scheduler.threads"));
  BOOST_TEST(contains(error_of("[scheduler]\nqueue = 1\n"), "unknown key"));
}

BOOST_AUTO_TEST_CASE(transactional_group_has_a_default_and_bounds) {
  auto defaults = aw::parse_config("", "worker.toml");
  BOOST_TEST(defaults.queues[0].transactional_group
             == aw::defaults::transactional_group);
  auto cfg = aw::parse_config("[queues.ledger]\ntransactional_group = 1\n"
                              "[queues.mail]\ntransactional_group = 64\n",
                              "worker.toml");
  BOOST_REQUIRE_EQUAL(cfg.queues.size(), 2u);
  for (auto& q : cfg.queues)
    BOOST_TEST(q.transactional_group == (q.name == "ledger" ? 1 : 64));
  auto zero = error_of("[queues.ledger]\ntransactional_group = 0\n");
  BOOST_TEST(contains(zero, "worker.toml:2"), zero);
  BOOST_TEST(contains(zero, "queues.ledger.transactional_group"), zero);
  BOOST_TEST(contains(zero, "out of range [1, 64]"), zero);
  auto big = error_of("[queues.ledger]\ntransactional_group = 65\n");
  BOOST_TEST(contains(big, "out of range [1, 64]"), big);
}

BOOST_AUTO_TEST_CASE(invalid_toml_names_file_and_line) {
  auto msg = error_of("[worker\nnode = 1\n");
  BOOST_TEST(contains(msg, "worker.toml:1"), msg);
  BOOST_TEST(contains(msg, "invalid TOML"), msg);
}

BOOST_AUTO_TEST_CASE(missing_file_is_a_clear_error) {
  try {
    aw::load_config("/nonexistent/worker.toml");
    BOOST_FAIL("expected a config_error");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "/nonexistent/worker.toml"));
  }
}

BOOST_AUTO_TEST_CASE(pooler_and_listen_url_decide_the_listen_connection) {
  auto direct = aw::parse_config("[database]\nurl = \"postgresql://h/db\"\n",
                                 "worker.toml");
  BOOST_TEST(direct.database.pooler == "none");
  BOOST_TEST(direct.database.notification_url() == "postgresql://h/db");
  auto pooled = aw::parse_config(
    "[database]\nurl = \"postgresql://bouncer/db\"\npooler = "
    "\"transaction\"\n",
    "worker.toml");
  BOOST_TEST(pooled.database.notification_url().empty());
  auto listening = aw::parse_config(
    "[database]\nurl = \"postgresql://bouncer/db\"\npooler = "
    "\"transaction\"\nlisten_url = \"postgresql://primary/db\"\n",
    "worker.toml");
  BOOST_TEST(listening.database.notification_url()
             == "postgresql://primary/db");
  auto msg = error_of("[database]\n\npooler = \"session\"\n");
  BOOST_TEST(contains(msg, "worker.toml:3"), msg);
  BOOST_TEST(contains(msg, "database.pooler"), msg);
  BOOST_TEST(contains(msg, "\"transaction\""), msg);
}

// -- [kinds.NAME]: command and HTTP kinds ----------------------------------------

BOOST_AUTO_TEST_CASE(command_kinds_are_read_with_their_options) {
  auto cfg = aw::parse_config(R"(
[kinds.send_email]
command = ["python3", "send.py", "--fast"]
cwd = "/srv/app"
env = { SMTP_HOST = "mail.local", MODE = "prod" }
timeout = "5m"
kill_grace = "3s"
callback_timeout = "2h"

[kinds.resize]
command = ["/usr/bin/resize"]
)",
                              "worker.toml");
  // Sorted by name (TOML tables have no order).
  BOOST_REQUIRE(cfg.kinds.size() == 2u);
  auto& k = cfg.kinds[1];
  BOOST_TEST(k.name == "send_email");
  BOOST_TEST(k.where == "worker.toml:2");
  BOOST_REQUIRE(k.command.has_value());
  BOOST_TEST(!k.http.has_value());
  BOOST_TEST((k.command->argv
              == std::vector<std::string>{"python3", "send.py", "--fast"}));
  BOOST_TEST(k.command->cwd == "/srv/app");
  BOOST_REQUIRE(k.command->env.size() == 2u);
  BOOST_TEST(k.command->env[1].first == "SMTP_HOST");
  BOOST_TEST(k.command->env[1].second == "mail.local");
  BOOST_TEST(k.command->timeout.count() == 300000);
  BOOST_TEST(k.command->kill_grace.count() == 3000);
  BOOST_REQUIRE(k.callback_timeout.has_value());
  BOOST_TEST(k.callback_timeout->count() == 7'200'000);
  auto& r = cfg.kinds[0];
  BOOST_TEST(!r.callback_timeout.has_value());
  BOOST_TEST(r.name == "resize");
  BOOST_TEST(r.command->timeout.count() == 0);
  BOOST_TEST(r.command->kill_grace.count() == aw::defaults::kill_grace.count());
  BOOST_TEST(r.command->env.empty());
}

BOOST_AUTO_TEST_CASE(http_kinds_take_header_values_from_the_environment) {
  ::setenv("AW_TEST_API_TOKEN", "s3cr3t-token", 1);
  auto cfg = aw::parse_config(R"(
[kinds.notify]
http = { url = "https://hooks.example.com/jobs", timeout = "10s", headers = { Authorization = "Bearer ${AW_TEST_API_TOKEN}", X-Team = "ops" } }

[kinds.plain.http]
url = "http://127.0.0.1:8080/run"
)",
                              "worker.toml");
  BOOST_REQUIRE(cfg.kinds.size() == 2u);
  auto& h = *cfg.kinds[0].http;
  BOOST_TEST(h.url == "https://hooks.example.com/jobs");
  BOOST_TEST(h.timeout.count() == 10000);
  BOOST_REQUIRE(h.headers.size() == 2u);
  BOOST_TEST(h.headers[0].name == "Authorization");
  // Loading checks the reference; `run` resolves it (when it registers
  // the kind), so other commands need none of the worker's secrets.
  BOOST_TEST(h.headers[0].value == "Bearer ${AW_TEST_API_TOKEN}");
  BOOST_TEST(h.headers[0].where == "worker.toml:3: key "
                                   "'kinds.notify.http.headers.Authorization'");
  aw::resolve_header_variables(h);
  ::unsetenv("AW_TEST_API_TOKEN");
  BOOST_TEST(h.headers[0].value == "Bearer s3cr3t-token");
  BOOST_TEST(h.headers[1].value == "ops");
  auto& p = *cfg.kinds[1].http;
  BOOST_TEST(p.timeout.count() == aw::defaults::http_timeout.count());
  BOOST_TEST(p.headers.empty());
}

BOOST_AUTO_TEST_CASE(an_unset_header_variable_names_file_line_and_key) {
  ::unsetenv("AW_TEST_UNSET_TOKEN");
  auto cfg = aw::parse_config(
    "[kinds.notify.http]\nurl = \"http://h/x\"\n"
    "headers = { Authorization = \"${AW_TEST_UNSET_TOKEN}\" }\n",
    "worker.toml");
  std::string msg;
  try {
    aw::resolve_header_variables(*cfg.kinds.at(0).http);
  } catch (const aw::config_error& e) {
    msg = e.what();
  }
  BOOST_TEST(contains(msg, "worker.toml:3: key "
                           "'kinds.notify.http.headers.Authorization': "
                           "environment variable AW_TEST_UNSET_TOKEN is not "
                           "set"),
             msg);
  // Malformed references are found at load.
  auto open = error_of("[kinds.n.http]\nurl = \"http://h/x\"\n"
                       "headers = { A = \"${OOPS\" }\n");
  BOOST_TEST(contains(open, "worker.toml:3: key 'kinds.n.http.headers.A': "
                            "'${' without a closing"),
             open);
  auto name = error_of("[kinds.n.http]\nurl = \"http://h/x\"\n"
                       "headers = { A = \"${1X}\" }\n");
  BOOST_TEST(contains(name, "not an environment variable name"), name);
}

BOOST_AUTO_TEST_CASE(header_values_never_appear_in_config_errors) {
  ::setenv("AW_TEST_MULTILINE", "secret-part-one\nsecret-part-two", 1);
  auto cfg = aw::parse_config(
    "[kinds.n.http]\nurl = \"http://h/x\"\n"
    "headers = { Authorization = \"${AW_TEST_MULTILINE}\" }\n",
    "worker.toml");
  std::string msg;
  try {
    aw::resolve_header_variables(*cfg.kinds.at(0).http);
  } catch (const aw::config_error& e) {
    msg = e.what();
  }
  ::unsetenv("AW_TEST_MULTILINE");
  BOOST_TEST(contains(msg, "worker.toml:3"), msg);
  BOOST_TEST(contains(msg, "line break"), msg);
  BOOST_TEST(!contains(msg, "secret"), msg);
  auto literal = error_of("[kinds.n.http]\nurl = \"http://h/x\"\n"
                          "headers = { A = \"x\\r\\nInjected: 1\" }\n");
  BOOST_TEST(contains(literal, "line break"), literal);
  BOOST_TEST(!contains(literal, "Injected"), literal);
  auto bad_name = error_of("[kinds.n.http]\nurl = \"http://h/x\"\n"
                           "headers = { \"Bad Name\" = \"v\" }\n");
  BOOST_TEST(contains(bad_name, "not a valid header name"), bad_name);
}

BOOST_AUTO_TEST_CASE(a_kind_needs_exactly_one_of_command_and_http) {
  auto neither = error_of("[kinds.a]\ntimeout = \"1s\"\n");
  BOOST_TEST(contains(neither, "worker.toml:1: key 'kinds.a'"), neither);
  BOOST_TEST(contains(neither, "needs 'command'"), neither);
  auto both = error_of("\n[kinds.b]\ncommand = [\"x\"]\n"
                       "http = { url = \"http://h/\" }\n");
  BOOST_TEST(contains(both, "worker.toml:2: key 'kinds.b'"), both);
  BOOST_TEST(contains(both, "both 'command' and 'http'"), both);
  auto empty = error_of("[kinds.c]\n");
  BOOST_TEST(contains(empty, "kinds.c"), empty);
  BOOST_TEST(contains(error_of("kinds = 3\n"), "expected a table"));
  BOOST_TEST(contains(error_of("[kinds]\nd = \"x\"\n"), "expected a table"));
}

BOOST_AUTO_TEST_CASE(unknown_and_mistyped_kind_keys_name_the_key) {
  auto unknown = error_of("[kinds.a]\ncommand = [\"x\"]\n\ntimout = \"1s\"\n");
  BOOST_TEST(contains(unknown, "worker.toml:4: key 'kinds.a.timout': unknown "
                               "key"),
             unknown);
  // An HTTP kind's options sit inside `http`.
  auto outside = error_of("[kinds.h]\nhttp = { url = \"http://h/\" }\n"
                          "timeout = \"1s\"\n");
  BOOST_TEST(contains(outside, "worker.toml:3: key 'kinds.h.timeout': "
                               "unknown key"),
             outside);
  auto inside = error_of("[kinds.h]\nhttp = { url = \"http://h/\", "
                         "method = \"PUT\" }\n");
  BOOST_TEST(contains(inside, "kinds.h.http.method"), inside);
  auto string = error_of("[kinds.a]\ncommand = \"python3 send.py\"\n");
  BOOST_TEST(contains(string, "worker.toml:2: key 'kinds.a.command': "
                              "expected an array of strings"),
             string);
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = []\n"), "must name a "
                                                             "program"));
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = [\"x\", 1]\n"),
                      "expected an array of strings"));
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = [\"\"]\n"),
                      "program name is empty"));
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = [\"x\"]\nkill_grace = "
                               "\"soon\"\n"),
                      "kinds.a.kill_grace"));
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = [\"x\"]\nenv = { "
                               "A = 1 }\n"),
                      "kinds.a.env.A"));
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = [\"x\"]\ncwd = \"\"\n"),
                      "kinds.a.cwd"));
  // callback_timeout: a positive duration, on command and HTTP kinds.
  BOOST_TEST(contains(error_of("[kinds.a]\ncommand = [\"x\"]\n"
                               "callback_timeout = \"0s\"\n"),
                      "kinds.a.callback_timeout"));
  BOOST_TEST(contains(error_of("[kinds.a]\nhttp = { url = \"http://h/x\" }\n"
                               "callback_timeout = \"soon\"\n"),
                      "kinds.a.callback_timeout"));
}

BOOST_AUTO_TEST_CASE(http_kinds_need_a_valid_url_and_a_positive_timeout) {
  auto missing = error_of("[kinds.h]\nhttp = { timeout = \"1s\" }\n");
  BOOST_TEST(contains(missing, "worker.toml:2: key 'kinds.h.http': missing "
                               "key 'url'"),
             missing);
  for (auto url : {"ftp://h/x", "localhost:8080", "http://", "http:///x",
                   "http://h/a b"})
    BOOST_TEST(contains(error_of(std::string{"[kinds.h]\nhttp = { url = \""}
                                 + url + "\" }\n"),
                        "expected an http:// or https:// URL"),
               url);
  auto zero = error_of("[kinds.h]\nhttp = { url = \"http://h/\", timeout = "
                       "\"0\" }\n");
  BOOST_TEST(contains(zero, "worker.toml:2: key 'kinds.h.http.timeout': "
                            "must be greater than 0"),
             zero);
  BOOST_TEST(contains(error_of("[kinds.h]\nhttp = \"http://h/\"\n"),
                      "expected a table"));
}

BOOST_AUTO_TEST_CASE(kind_names_are_bounded_and_printable) {
  auto ctl = error_of("[kinds.\"a\\u0007b\"]\ncommand = [\"x\"]\n");
  BOOST_TEST(contains(ctl, "without control characters"), ctl);
  auto long_name = error_of("[kinds." + std::string(201, 'k')
                            + "]\ncommand = [\"x\"]\n");
  BOOST_TEST(contains(long_name, "1 to 200 bytes"), long_name);
}

BOOST_AUTO_TEST_CASE(transactional_settings_out_of_range_name_their_key) {
  auto zero = error_of("[database]\ntransaction_timeout = \"0\"\n");
  BOOST_TEST(contains(zero, "database.transaction_timeout"), zero);
  BOOST_TEST(contains(zero, "greater than 0"), zero);
  auto none = error_of("[database]\ntransactional_pool_size = 0\n");
  BOOST_TEST(contains(none, "database.transactional_pool_size"), none);
  BOOST_TEST(contains(none, "out of range"), none);
}

BOOST_AUTO_TEST_CASE(the_example_worker_toml_shows_every_worker_default) {
  // examples/worker.toml says it shows "every key, with its default": the
  // values it sets must be those of config/defaults.hpp.
  auto cfg = aw::load_config(std::string{AW_SOURCE_DIR} + "/examples/worker.toml");
  aw::worker_config d;
  auto& w = cfg.worker;
  auto same = [](std::chrono::milliseconds a, std::chrono::milliseconds b) {
    return aw::format_duration(a) + " (defaults.hpp: " + aw::format_duration(b)
           + ")";
  };
  BOOST_TEST((w.poll_interval == d.poll_interval), same(w.poll_interval, d.poll_interval));
  BOOST_TEST(w.max_retries == d.max_retries);
  BOOST_TEST((w.shutdown_drain == d.shutdown_drain), same(w.shutdown_drain, d.shutdown_drain));
  BOOST_TEST((w.completed_retention == d.completed_retention),
             same(w.completed_retention, d.completed_retention));
  BOOST_TEST((w.dead_letter_retention == d.dead_letter_retention),
             same(w.dead_letter_retention, d.dead_letter_retention));
  BOOST_TEST((w.maintenance_interval == d.maintenance_interval),
             "maintenance_interval: " + same(w.maintenance_interval, d.maintenance_interval));
  BOOST_TEST((w.heartbeat_interval == d.heartbeat_interval),
             same(w.heartbeat_interval, d.heartbeat_interval));
  BOOST_TEST((w.reclaim_window == d.reclaim_window), same(w.reclaim_window, d.reclaim_window));
  BOOST_TEST(w.idle_poll_permits == d.idle_poll_permits);
  BOOST_TEST(w.local_queue_size == d.local_queue_size);
  BOOST_TEST(w.local_queue_bytes == d.local_queue_bytes);
  aw::database_config db;
  BOOST_TEST(cfg.database.pool_size == db.pool_size);
  BOOST_TEST(cfg.database.transactional_pool_size == db.transactional_pool_size);
  BOOST_TEST((cfg.database.transaction_timeout == db.transaction_timeout),
             same(cfg.database.transaction_timeout, db.transaction_timeout));
}

BOOST_AUTO_TEST_SUITE_END()
