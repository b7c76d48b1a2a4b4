// Queues sharded across two databases on two real servers: `migrate`
// migrates both, the CLI routes by queue or --database, one node serves
// queues of both, and an outage of one database stops only its queues
// (and only the dashboard's requests that name it).

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "dashboard_support.hpp"
#include "fault_fixture.hpp"

using namespace std::chrono_literals;
using namespace aw::fault;

namespace {

/// Inserts `n` noop jobs of `queue` with plain SQL (the SQL contract).
void insert_noops(db_session& db, const std::string& queue, int n) {
  db.exec("INSERT INTO jobs_in (kind, queue) SELECT 'noop', " + db.quote(queue)
          + " FROM generate_series(1, " + std::to_string(n) + ")");
}

int64_t completed(db_session& db, const std::string& queue) {
  try {
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed' "
                     "AND queue = "
                     + db.quote(queue));
  } catch (const std::exception&) {
    return -1; // the server is down
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(sharding_test)

BOOST_AUTO_TEST_CASE(an_outage_of_one_database_stops_only_its_queues) {
  fault_env env{"sharding"};
  auto orders_dir = env.dir() + "/orders";
  BOOST_REQUIRE(::mkdir(orders_dir.c_str(), 0700) == 0);
  pg_cluster orders{orders_dir};
  port_reservation http;
  worker_timings t;
  t.extra_toml = "\n[queues.orders]\nconcurrency = 5\ndatabase = \"orders\"\n"
                 "\n[databases.orders]\nurl = \""
                 + orders.url() + "\"\npool_size = 1\n"
                 + dash::http_toml(http.port());
  auto cfg = env.config(t);
  db_session main_db{env.url()};
  db_session orders_db{orders.url()};

  // `migrate` migrates every database the file names (the default one was
  // migrated by the fixture: a no-op there).
  auto migrated = env.run({"--config", cfg, "migrate"});
  BOOST_REQUIRE_MESSAGE(migrated.exit_code == 0, migrated.err);
  BOOST_TEST(contains(migrated.err, "database 'orders': applied migration"));
  BOOST_TEST(contains(migrated.err, "database 'default': schema is up to date"));
  BOOST_TEST(orders_db.scalar("SELECT count(*) FROM jobs_live") == 0);

  // The CLI routes by queue, or by --database.
  auto id = env.enqueue({"--config", cfg, "noop", "--queue", "orders"});
  BOOST_TEST(orders_db.scalar("SELECT count(*) FROM jobs_live WHERE id = "
                              + std::to_string(id) + " AND queue = 'orders'")
             == 1);
  BOOST_TEST(main_db.scalar("SELECT count(*) FROM jobs_live WHERE queue = 'orders'")
             == 0);
  auto listed = env.run({"--config", cfg, "--database", "orders", "jobs",
                         "list", "--json"});
  BOOST_TEST(listed.exit_code == 0);
  BOOST_TEST(contains(listed.out, "\"queue\":\"orders\""));
  auto clash = env.run({"--config", cfg, "--database", "default", "enqueue",
                        "noop", "--queue", "orders"});
  BOOST_TEST(clash.exit_code == 2);
  BOOST_TEST(contains(clash.err, "queue 'orders' lives in database 'orders'"));
  auto unknown = env.run({"--config", cfg, "--database", "nope", "queues"});
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(contains(unknown.err, "no database named 'nope'"));

  // One node serves the queues of both databases.
  auto worker = env.start_worker("A", t);
  insert_noops(main_db, "default", 500);
  insert_noops(orders_db, "orders", 500);
  BOOST_REQUIRE_MESSAGE(wait_until(
                          [&] {
                            return completed(main_db, "default") == 500
                                   && completed(orders_db, "orders") == 501;
                          },
                          60s),
                        "not every job completed in both databases");
  // `queues` lists the queues of every database, each with its database.
  auto listed_queues = env.run({"--config", cfg, "queues", "--json"});
  BOOST_REQUIRE_MESSAGE(listed_queues.exit_code == 0, listed_queues.err);
  std::map<std::string, std::string> home;
  for (auto& q : nlohmann::json::parse(listed_queues.out))
    home[q.at("queue").get<std::string>()] = q.at("database").get<std::string>();
  BOOST_TEST(home["orders"] == "orders");
  BOOST_TEST(home["default"] == "default");
  auto only_orders = env.run({"--config", cfg, "--database", "orders",
                              "queues", "--json"});
  BOOST_TEST(nlohmann::json::parse(only_orders.out).size() == 1u);
  // `nodes` lists the node once per database, each row with its database.
  auto listed_nodes = env.run({"--config", cfg, "nodes", "--json"});
  BOOST_REQUIRE_MESSAGE(listed_nodes.exit_code == 0, listed_nodes.err);
  std::multiset<std::string> node_databases;
  for (auto& n : nlohmann::json::parse(listed_nodes.out))
    node_databases.insert(n.at("database").get<std::string>());
  BOOST_TEST(node_databases.count("default") == 1u);
  BOOST_TEST(node_databases.count("orders") == 1u);
  // Each database has its own nodes row and its own leader.
  BOOST_TEST(main_db.scalar("SELECT count(*) FROM worker_nodes") == 1);
  BOOST_TEST(orders_db.scalar("SELECT count(*) FROM worker_nodes") == 1);
  BOOST_TEST(wait_until(
    [&] {
      return orders_db.scalar("SELECT count(*) FROM cluster_leader") == 1;
    },
    10s));

  // A callback id is found in whichever database holds it.
  auto parked = env.enqueue({"--config", cfg, "await_callback", "--queue",
                             "orders"});
  std::string callback_id;
  BOOST_REQUIRE(wait_until(
    [&] {
      callback_id = orders_db.text("SELECT callback_id FROM jobs_live WHERE id = "
                                   + std::to_string(parked)
                                   + " AND state = 'waiting_external'");
      return !callback_id.empty();
    },
    20s));
  auto resolved = env.run({"--config", cfg, "callback", "complete",
                           callback_id});
  BOOST_TEST(resolved.exit_code == 0, resolved.err);
  BOOST_TEST(orders_db.text("SELECT state FROM jobs_live WHERE id = "
                            + std::to_string(parked))
             == "completed");

  // The dashboard shows either database, as the request names it.
  auto shown = dash::get(http.port(), "/api/overview?database=orders");
  BOOST_REQUIRE_MESSAGE(shown.status == 200, shown.body);
  auto shown_body = shown.json();
  std::set<std::string> shown_queues;
  for (auto& q : shown_body["queues"])
    shown_queues.insert(q.at("queue").get<std::string>());
  BOOST_TEST(shown_queues.count("orders") == 1u, shown.body);
  BOOST_TEST(shown_queues.count("default") == 0u);

  // The orders server goes down: the default queue keeps running.
  orders.stop();
  insert_noops(main_db, "default", 500);
  BOOST_TEST(wait_until([&] { return completed(main_db, "default") == 1000; },
                        60s),
             "the default queue stalled while the orders database was down");
  BOOST_TEST(worker->running());
  // The dashboard: the requests naming orders answer 503, naming it; the
  // default database's pages go on.
  for (auto* path : {"/api/overview?database=orders",
                     "/api/jobs?database=orders"}) {
    auto down = dash::get(http.port(), path);
    BOOST_TEST(down.status == 503, path);
    BOOST_TEST(contains(down.body, "database unreachable (database 'orders')"),
               down.body);
  }
  auto up = dash::get(http.port(), "/api/overview");
  BOOST_TEST(up.status == 200, up.body);
  BOOST_TEST(up.json()["ready"]["ready"] == true, up.body);
  BOOST_TEST(dash::get(http.port(), "/api/jobs?state=completed").status == 200);

  // It comes back: the node takes its queues up again, unrestarted.
  orders.start();
  auto back = std::chrono::steady_clock::now();
  // The check session's first statement after the restart finds its
  // connection broken; it reconnects on the next.
  BOOST_REQUIRE(wait_until(
    [&] {
      try {
        insert_noops(orders_db, "orders", 500);
        return true;
      } catch (const std::exception&) {
        return false;
      }
    },
    10s));
  BOOST_TEST(wait_until([&] { return completed(orders_db, "orders") == 1002; },
                        60s),
             "the orders queue did not recover after its database returned");
  // The dashboard drops its broken connection and opens a new one.
  BOOST_TEST(wait_until(
    [&] {
      return dash::get(http.port(), "/api/jobs?database=orders").status == 200;
    },
    10s));
  BOOST_TEST_MESSAGE(
    "orders drained again "
    << std::chrono::duration_cast<std::chrono::milliseconds>(
         std::chrono::steady_clock::now() - back)
         .count()
    << " ms after its server came back");
  BOOST_TEST(worker->running());
  BOOST_TEST(contains(worker->err(), "[error]"));

  worker->signal(SIGTERM);
  auto code = worker->wait_exit(30s);
  BOOST_TEST((code && *code == 0));
  // The graceful stop left both databases: no running job, no nodes row.
  BOOST_TEST(main_db.scalar("SELECT count(*) FROM worker_nodes") == 0);
  BOOST_TEST(orders_db.scalar("SELECT count(*) FROM worker_nodes") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
