// [queues.Q] global_concurrency and rate_limit: parsed into the queue's
// config, inherited by the nodes that serve it, refused per node, and every
// error names file, line and key.

#include <boost/test/unit_test.hpp>

#include "actor_worker/config/config.hpp"
#include "unit/config_errors.hpp"

using namespace std::chrono_literals;
using aw_test::contains;

namespace {

std::string error_of(const std::string& text) {
  return aw_test::config_error_of(text, "cluster.toml");
}

} // namespace

BOOST_AUTO_TEST_SUITE(queue_controls_config_test)

BOOST_AUTO_TEST_CASE(limits_are_read_and_reach_every_node_serving_the_queue) {
  auto c = aw::parse_cluster(R"(
[queues.default]
[queues.mail]
concurrency = 4
global_concurrency = 3
rate_limit = "10/s"
[queues.reports]
rate_limit = "600/m"

[nodes.a]
queues = ["default", "mail"]
[nodes.b.queues.mail]
concurrency = 8
)",
                             "cluster.toml");
  auto& top = c.defaults.queues;
  BOOST_REQUIRE(top.size() == 3u);
  BOOST_TEST(top[0].global_concurrency == 0);
  BOOST_TEST(top[0].rate_limit == 0);
  BOOST_TEST(top[1].global_concurrency == 3);
  BOOST_TEST(top[1].rate_limit == 10);
  BOOST_TEST(top[1].rate_period.count() == 1000);
  BOOST_TEST(top[2].rate_limit == 600);
  BOOST_TEST(top[2].rate_period.count() == 60000);
  BOOST_REQUIRE(c.nodes.size() == 2u);
  auto& b_mail = c.nodes[1].config.queues.at(0);
  BOOST_TEST(b_mail.name == "mail");
  BOOST_TEST(b_mail.concurrency == 8);          // the node's own
  BOOST_TEST(b_mail.global_concurrency == 3);   // the cluster's
  BOOST_TEST(b_mail.rate_limit == 10);
}

BOOST_AUTO_TEST_CASE(parse_rate_limit_takes_per_second_and_per_minute_only) {
  auto [n, period] = aw::parse_rate_limit("25/s");
  BOOST_TEST(n == 25);
  BOOST_TEST(period.count() == 1000);
  auto [m, per_minute] = aw::parse_rate_limit("1/m");
  BOOST_TEST(m == 1);
  BOOST_TEST(per_minute.count() == 60000);
  for (const char* bad : {"10", "10/h", "/s", "0/s", "-1/s", "1.5/s", "10/",
                          "1000001/s", "10/ s", "ten/s"})
    BOOST_CHECK_THROW(aw::parse_rate_limit(bad), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(bad_limits_name_file_line_and_key) {
  auto e = error_of("[queues.mail]\nconcurrency = 2\nrate_limit = \"5/h\"\n");
  BOOST_TEST(contains(e, "cluster.toml:3: key 'queues.mail.rate_limit'"), e);
  BOOST_TEST(contains(e, "unknown period \"h\""), e);

  e = error_of("[queues.mail]\nrate_limit = 5\n");
  BOOST_TEST(contains(e, "cluster.toml:2: key 'queues.mail.rate_limit'"), e);
  BOOST_TEST(contains(e, "expected a string"), e);

  e = error_of("[queues.mail]\n\nglobal_concurrency = 0\n");
  BOOST_TEST(contains(e, "cluster.toml:3: key 'queues.mail.global_concurrency'"),
             e);
  BOOST_TEST(contains(e, "out of range [1, 1000000]"), e);

  e = error_of("[queues.mail]\nglobal_concurrency = \"3\"\n");
  BOOST_TEST(contains(e, "cluster.toml:2: key 'queues.mail.global_concurrency'"),
             e);
  BOOST_TEST(contains(e, "expected an integer"), e);
}

BOOST_AUTO_TEST_CASE(a_node_may_not_set_a_cluster_wide_limit) {
  auto e = error_of(R"([queues.mail]
global_concurrency = 3
[nodes.a.queues.mail]
concurrency = 2
global_concurrency = 5
)");
  BOOST_TEST(contains(e, "cluster.toml:5: key 'nodes.a.queues.mail.global_concurrency'"),
             e);
  BOOST_TEST(contains(e, "cluster-wide"), e);
  e = error_of("[nodes.a.queues.mail]\nrate_limit = \"1/s\"\n");
  BOOST_TEST(contains(e, "cluster.toml:2: key 'nodes.a.queues.mail.rate_limit'"),
             e);
}

BOOST_AUTO_TEST_CASE(validate_refuses_a_rate_without_its_period) {
  aw::runtime_config cfg;
  aw::queue_config q;
  q.name = "mail";
  q.rate_limit = 5; // no period
  cfg.queues.push_back(q);
  try {
    cfg.validate();
    BOOST_FAIL("validate accepted a rate limit without a period");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "queues.mail.rate_limit"), e.what());
  }
  cfg.queues[0].rate_period = 2s; // neither a second nor a minute
  BOOST_CHECK_THROW(cfg.validate(), aw::config_error);
  cfg.queues[0].rate_period = 1s;
  BOOST_CHECK_NO_THROW(cfg.validate());
}

BOOST_AUTO_TEST_SUITE_END()
