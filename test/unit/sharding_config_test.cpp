// [databases.NAME] and [queues.Q] database: queues sharded across
// databases. Parsed, inherited by every node, split per database for the
// supervisors, routed for the CLI, and every error names file, line, key.

#include <boost/test/unit_test.hpp>

#include "actor_worker/config/config.hpp"
#include "unit/config_errors.hpp"

using aw_test::contains;

namespace {

std::string error_of(const std::string& text) {
  return aw_test::config_error_of(text, "cluster.toml");
}

const char* const sharded = R"(
[database]
url = "postgresql://db-a/jobs"

[databases.orders]
url = "postgresql://db-b/jobs"
pool_size = 3
pooler = "transaction"
listen_url = "postgresql://db-b-direct/jobs"

[queues.default]
[queues.orders]
database = "orders"
concurrency = 4
[queues.reports]
database = "default"

[periodic.nightly]
cron = "0 3 * * *"
kind = "noop"
queue = "orders"

[nodes.a]
queues = ["default", "reports"]
[nodes.b]
queues = ["orders"]
)";

} // namespace

BOOST_AUTO_TEST_SUITE(sharding_config_test)

BOOST_AUTO_TEST_CASE(databases_and_queue_mappings_are_read) {
  auto c = aw::parse_cluster(sharded, "cluster.toml");
  auto& top = c.defaults;
  BOOST_TEST(top.sharded());
  BOOST_REQUIRE(top.databases.size() == 1u);
  BOOST_TEST(top.databases[0].name == "orders");
  BOOST_TEST(top.databases[0].settings.url == "postgresql://db-b/jobs");
  BOOST_TEST(top.databases[0].settings.pool_size == 3);
  BOOST_TEST(top.databases[0].settings.pooler == "transaction");
  BOOST_TEST(top.databases[0].settings.notification_url()
             == "postgresql://db-b-direct/jobs");
  BOOST_TEST(top.database_of("orders") == "orders");
  // "default" names [database]; an unmapped queue lives there too.
  BOOST_TEST(top.database_of("reports") == "default");
  BOOST_TEST(top.database_of("never_configured") == "default");
  BOOST_TEST(top.database_named("default").url == "postgresql://db-a/jobs");
  BOOST_TEST(top.database_named("orders").url == "postgresql://db-b/jobs");
  BOOST_TEST((top.database_names() == std::vector<std::string>{"default",
                                                               "orders"}));
  // Every node routes alike, whichever queues it serves.
  BOOST_REQUIRE(c.nodes.size() == 2u);
  BOOST_TEST(c.nodes[0].config.database_of("orders") == "orders");
  BOOST_TEST(c.nodes[1].config.database_of("orders") == "orders");
}

BOOST_AUTO_TEST_CASE(for_database_splits_queues_and_schedules) {
  auto c = aw::parse_cluster(sharded, "cluster.toml");
  auto a = c.defaults.for_database("default");
  BOOST_TEST(a.database.url == "postgresql://db-a/jobs");
  BOOST_TEST(a.databases.empty());
  BOOST_REQUIRE(a.queues.size() == 2u);
  BOOST_TEST(a.queues[0].name == "default");
  BOOST_TEST(a.queues[1].name == "reports");
  BOOST_TEST(a.periodic.empty());
  auto b = c.defaults.for_database("orders");
  BOOST_TEST(b.database.url == "postgresql://db-b/jobs");
  BOOST_TEST(b.database.pool_size == 3);
  BOOST_REQUIRE(b.queues.size() == 1u);
  BOOST_TEST(b.queues[0].name == "orders");
  BOOST_TEST(b.queues[0].concurrency == 4);
  BOOST_REQUIRE(b.periodic.size() == 1u);
  BOOST_TEST(b.periodic[0].name == "nightly");
  // Node b serves only orders: nothing of it lives in the default database.
  auto node_b = aw::select_node(c, "b");
  BOOST_TEST(node_b.for_database("default").queues.empty());
  BOOST_TEST(node_b.for_database("orders").queues.size() == 1u);
  BOOST_CHECK_THROW(c.defaults.for_database("nope"), aw::config_error);
}

BOOST_AUTO_TEST_CASE(routed_picks_the_queue_database_or_the_named_one) {
  auto top = aw::parse_cluster(sharded, "cluster.toml").defaults;
  BOOST_TEST(top.routed("", "orders").database.url == "postgresql://db-b/jobs");
  BOOST_TEST(top.routed("", "").database.url == "postgresql://db-a/jobs");
  BOOST_TEST(top.routed("orders", "").database.url
             == "postgresql://db-b/jobs");
  BOOST_TEST(top.routed("orders", "orders").database.url
             == "postgresql://db-b/jobs");
  try {
    top.routed("default", "orders");
    BOOST_FAIL("a queue routed to another database was accepted");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "queue 'orders' lives in database 'orders'"));
  }
  try {
    top.routed("nope", "");
    BOOST_FAIL("an unknown database was accepted");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "no database named 'nope'"));
    BOOST_TEST(contains(e.what(), "default, orders"));
  }
}

BOOST_AUTO_TEST_CASE(follow_ups_must_stay_in_their_trigger_database) {
  auto top = aw::parse_cluster(sharded, "cluster.toml").defaults;
  top.require_database("orders", "orders", "a follow-up");
  top.require_database("reports", "default", "a follow-up");
  try {
    top.require_database("orders", "default", "a follow-up of kind 'x'");
    BOOST_FAIL("a follow-up into another database was accepted");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(contains(e.what(), "a follow-up of kind 'x' goes to queue "
                                  "'orders', which lives in database "
                                  "'orders'"));
  }
}

BOOST_AUTO_TEST_CASE(a_single_database_file_is_unchanged) {
  auto top = aw::parse_cluster("[queues.default]\n", "worker.toml").defaults;
  BOOST_TEST(!top.sharded());
  BOOST_TEST((top.database_names() == std::vector<std::string>{"default"}));
  BOOST_TEST(top.for_database("default").queues.size() == 1u);
}

BOOST_AUTO_TEST_CASE(errors_name_file_line_and_key) {
  // A queue mapped to a database the file does not name.
  auto e = error_of("[queues.orders]\ndatabase = \"orders\"\n");
  BOOST_TEST(contains(e, "cluster.toml:2"), e);
  BOOST_TEST(contains(e, "queues.orders.database"), e);
  BOOST_TEST(contains(e, "not a database of this file"), e);
  // A further database without a URL.
  e = error_of("[databases.orders]\npool_size = 2\n");
  BOOST_TEST(contains(e, "cluster.toml:1"), e);
  BOOST_TEST(contains(e, "url is required"), e);
  // "default" is the [database] section.
  e = error_of("[databases.default]\nurl = \"postgresql://x/y\"\n");
  BOOST_TEST(contains(e, "the default database is the [database] section"), e);
  // Two names for one database.
  e = error_of("[database]\nurl = \"postgresql://x/y\"\n"
               "[databases.b]\nurl = \"postgresql://x/y\"\n");
  BOOST_TEST(contains(e, "databases.b.url is the same as database.url"), e);
  // Unknown keys and bad values, as in [database].
  e = error_of("[databases.b]\nurl = \"postgresql://x/y\"\nhost = \"x\"\n");
  BOOST_TEST(contains(e, "databases.b.host"), e);
  e = error_of("[databases.b]\nurl = \"postgresql://x/y\"\npooler = \"x\"\n");
  BOOST_TEST(contains(e, "databases.b.pooler"), e);
  // The mapping is cluster-wide: not per node.
  e = error_of("[databases.b]\nurl = \"postgresql://x/y\"\n"
               "[nodes.n.queues.q]\ndatabase = \"b\"\n");
  BOOST_TEST(contains(e, "nodes.n.queues.q.database"), e);
  BOOST_TEST(contains(e, "cluster-wide"), e);
  // A database name that is not a string.
  e = error_of("[queues.q]\ndatabase = 3\n");
  BOOST_TEST(contains(e, "queues.q.database"), e);
}

BOOST_AUTO_TEST_SUITE_END()
