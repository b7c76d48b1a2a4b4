// [periodic.NAME] sections: every key read, the defaults, and every error
// naming file, line and key (cron expressions, time zones, kinds, queues
// no node serves).

#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "actor_worker/config/config.hpp"
#include "unit/config_errors.hpp"

namespace {

using aw_test::contains;

std::string error_of(const std::string& text) {
  return aw_test::config_error_of(text, "cluster.toml");
}

} // namespace

BOOST_AUTO_TEST_SUITE(periodic_config_test)

BOOST_AUTO_TEST_CASE(every_key_is_read) {
  auto c = aw::parse_cluster(R"(
[periodic.nightly_report]
cron = "30 2 * * MON-FRI"
kind = "report"
args = { to = "ops@example.com", days = 7, tags = ["a", "b"], nested = { x = 1.5 } }
queue = "reports"
priority = -5
timezone = "Europe/Berlin"
catch_up = "none"

[periodic.heartbeat]
cron = "*/10 * * * * *"
kind = "noop"
)",
                             "cluster.toml");
  auto& ps = c.defaults.periodic;
  BOOST_REQUIRE(ps.size() == 2u);
  // Sorted by name.
  auto& h = ps[0];
  auto& r = ps[1];
  BOOST_TEST(h.name == "heartbeat");
  BOOST_TEST(h.cron == "*/10 * * * * *");
  BOOST_TEST(h.kind == "noop");
  BOOST_TEST(h.args_json == "{}");
  BOOST_TEST(h.queue == "default");
  BOOST_TEST(h.priority == 0);
  BOOST_TEST(h.timezone == "UTC");
  BOOST_TEST(aw::to_string(h.catch_up) == "latest");
  BOOST_TEST(h.where == "cluster.toml:11");

  BOOST_TEST(r.name == "nightly_report");
  BOOST_TEST(r.where == "cluster.toml:2");
  BOOST_TEST(r.kind == "report");
  BOOST_TEST(r.queue == "reports");
  BOOST_TEST(r.priority == -5);
  BOOST_TEST(r.timezone == "Europe/Berlin");
  BOOST_TEST(aw::to_string(r.catch_up) == "none");
  BOOST_TEST(r.spec() == "30 2 * * MON-FRI @ Europe/Berlin");
  auto args = nlohmann::json::parse(r.args_json);
  BOOST_TEST(args["to"] == "ops@example.com");
  BOOST_TEST(args["days"] == 7);
  BOOST_TEST(args["tags"] == nlohmann::json({"a", "b"}));
  BOOST_TEST(args["nested"]["x"] == 1.5);
  // The schedule parses: the next 02:30 on a weekday in Berlin.
  auto next = r.schedule().next_after(aw::cron_time{std::chrono::seconds{0}});
  BOOST_TEST(aw::format_utc(*next) == "1970-01-01T01:30:00Z");
}

BOOST_AUTO_TEST_CASE(a_cluster_file_gives_every_node_the_schedules) {
  auto c = aw::parse_cluster(R"(
[queues.default]
[queues.mail]

[periodic.digest]
cron = "0 8 * * *"
kind = "digest"
queue = "mail"

[nodes.a]
queues = ["default"]
[nodes.b]
queues = ["mail"]
)",
                             "cluster.toml");
  BOOST_REQUIRE(c.nodes.size() == 2u);
  for (auto& n : c.nodes) {
    BOOST_REQUIRE(n.config.periodic.size() == 1u);
    BOOST_TEST(n.config.periodic[0].queue == "mail");
  }
}

BOOST_AUTO_TEST_CASE(invalid_cron_expressions_name_file_line_and_key) {
  auto e = error_of(R"(
[periodic.x]
kind = "noop"
cron = "61 * * * *"
)");
  BOOST_TEST_INFO(e);
  BOOST_TEST(contains(e, "cluster.toml:4: key 'periodic.x.cron': invalid cron "
                         "expression \"61 * * * *\": the minute field \"61\": "
                         "61 is out of range 0-59"));
  e = error_of("[periodic.x]\nkind = \"noop\"\ncron = \"0 0 31 2 *\"\n");
  BOOST_TEST(contains(e, "cluster.toml:3: key 'periodic.x.cron'"));
  BOOST_TEST(contains(e, "never matches"));
  e = error_of("[periodic.x]\nkind = \"noop\"\ncron = 5\n");
  BOOST_TEST(contains(e, "cluster.toml:3: key 'periodic.x.cron': expected a string"));
}

BOOST_AUTO_TEST_CASE(unknown_time_zones_name_file_line_and_key) {
  auto e = error_of(R"(
[periodic.x]
kind = "noop"
cron = "* * * * *"
timezone = "Europe/Berlln"
)");
  BOOST_TEST_INFO(e);
  BOOST_TEST(contains(e, "cluster.toml:5: key 'periodic.x.timezone': unknown "
                         "time zone \"Europe/Berlln\""));
}

BOOST_AUTO_TEST_CASE(missing_and_unknown_keys_and_bad_values) {
  auto e = error_of("[periodic.x]\ncron = \"* * * * *\"\n");
  BOOST_TEST(contains(e, "cluster.toml:1: key 'periodic.x': missing key 'kind'"));
  e = error_of("[periodic.x]\nkind = \"noop\"\n");
  BOOST_TEST(contains(e, "key 'periodic.x': missing key 'cron'"));
  e = error_of("[periodic.x]\nkind = \"noop\"\ncron = \"* * * * *\"\nevery = \"1s\"\n");
  BOOST_TEST(contains(e, "cluster.toml:4: key 'periodic.x.every': unknown key"));
  e = error_of("[periodic.x]\nkind = \"noop\"\ncron = \"* * * * *\"\ncatch_up = true\n");
  BOOST_TEST(contains(e, "cluster.toml:4: key 'periodic.x.catch_up': expected a string"));
  e = error_of("[periodic.x]\nkind = \"noop\"\ncron = \"* * * * *\"\ncatch_up = \"all\"\n");
  BOOST_TEST(contains(e, "cluster.toml:4: key 'periodic.x.catch_up': expected "
                         "\"latest\""));
  e = error_of("[periodic.x]\nkind = \"noop\"\ncron = \"* * * * *\"\nargs = [1, 2]\n");
  BOOST_TEST(contains(e, "cluster.toml:4: key 'periodic.x.args': expected a table"));
  e = error_of("[periodic.x]\nkind = \"\"\ncron = \"* * * * *\"\n");
  BOOST_TEST(contains(e, "cluster.toml:2: key 'periodic.x.kind': a kind name must be 1 to"));
  e = error_of("[periodic.x]\nkind = \"a\"\nqueue = \"\"\ncron = \"* * * * *\"\n");
  BOOST_TEST(contains(e, "cluster.toml:3: key 'periodic.x.queue': a queue name"));
  e = error_of("[periodic.x]\nkind = \"a\"\npriority = \"high\"\ncron = \"* * * * *\"\n");
  BOOST_TEST(contains(e, "cluster.toml:3: key 'periodic.x.priority': expected an integer"));
  e = error_of("[periodic]\nx = 1\n");
  BOOST_TEST(contains(e, "cluster.toml:2: key 'periodic.x': expected a table"));
}

BOOST_AUTO_TEST_CASE(a_queue_no_node_serves_is_an_error_in_a_cluster_file) {
  auto e = error_of(R"(
[queues.default]

[periodic.digest]
cron = "0 8 * * *"
kind = "digest"
queue = "mail"

[nodes.a]
[nodes.b]
queues = ["default"]
)");
  BOOST_TEST_INFO(e);
  BOOST_TEST(contains(e, "cluster.toml:7: key 'periodic.digest.queue': queue "
                         "'mail' is served by none of the nodes (a, b)"));
  // Without [nodes] the file is one node's: other processes may serve it.
  BOOST_TEST(error_of("[periodic.d]\ncron = \"@daily\"\nkind = \"k\"\n"
                      "queue = \"mail\"\n")
             == "");
}

BOOST_AUTO_TEST_SUITE_END()
