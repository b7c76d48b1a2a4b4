// The dashboard with queues in two databases (two databases of the test
// server, as sharding_test has them), over real HTTP from an in-process
// node: /api/session lists both; every read and action goes to the
// database `database=NAME` names (absent: the default one), and an
// action's audit row with it; an unknown name is refused with 400 naming
// it; overview, nodes and schedules show only that database's queues and
// schedules; and a configured database that cannot be reached answers 503
// while the default one keeps working. A real server stopped under a
// running node is test/fault/sharding_test.cpp's.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "pg_fixture.hpp"
#include "refusing_port.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;
using json = nlohmann::json;

using aw::test::refusing_port;

namespace {

const std::string token = "dashboard-databases-test-token-0123";

/// A free port for the node's endpoint (the kernel's pick; released
/// before the node binds it).
int free_port() {
  refusing_port p;
  return p.port();
}

struct answer {
  int status = 0;
  json body;
};

answer request(int port, const std::string& method, const std::string& path,
               const json& body = json::object()) {
  httplib::Client client{"127.0.0.1", port};
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(30, 0);
  // An action as the page sends it: JSON, the token, this origin.
  httplib::Headers headers{
    {"Authorization", "Bearer " + token},
    {"Origin", "http://127.0.0.1:" + std::to_string(port)}};
  auto res = method == "POST" ? client.Post(path.c_str(), headers,
                                            body.dump(), "application/json")
                              : client.Get(path.c_str());
  if (!res)
    return {};
  return {res->status, json::parse(res->body, nullptr, false)};
}

answer get(int port, const std::string& path) {
  return request(port, "GET", path);
}

answer post(int port, const std::string& path,
            const json& body = json::object()) {
  return request(port, "POST", path, body);
}

std::vector<int64_t> ids_of(const json& rows) {
  std::vector<int64_t> ids;
  for (auto& r : rows)
    ids.push_back(r.at("id").get<int64_t>());
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::set<std::string> names_of(const json& rows, const char* key) {
  std::set<std::string> names;
  for (auto& r : rows)
    names.insert(r.at(key).get<std::string>());
  return names;
}

aw::periodic_config yearly(const std::string& name, const std::string& queue) {
  aw::periodic_config p;
  p.name = name;
  p.cron = "0 3 1 1 *";
  p.kind = "ping";
  p.queue = queue;
  p.catch_up = aw::catch_up_policy::none;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(dashboard_databases_test)

BOOST_AUTO_TEST_CASE(every_route_reads_and_acts_on_the_database_it_names) {
  aw::test::fresh_database main;
  aw::test::fresh_database orders{false};
  refusing_port dead;

  // [database] with queue default, [databases.orders] with queue orders,
  // a schedule in each, and [databases.gone] with no queue on a port that
  // refuses connections (the node needs nothing there; the dashboard
  // offers it).
  auto cfg = main.config(2);
  aw::named_database o;
  o.name = "orders";
  o.settings.url = orders.url;
  o.settings.pool_size = 1;
  aw::named_database gone;
  gone.name = "gone";
  gone.settings.url = "postgresql://postgres@127.0.0.1:"
                      + std::to_string(dead.port()) + "/gone";
  cfg.databases = {gone, o};
  aw::queue_config q;
  q.name = "orders";
  q.concurrency = 2;
  cfg.queues.push_back(q);
  cfg.queue_databases["orders"] = "orders";
  cfg.periodic = {yearly("nightly_main", "default"),
                  yearly("nightly_orders", "orders")};
  cfg.metrics.queue_stats_interval = 200ms;
  cfg.http.token = token;
  aw::migrate(cfg.for_database("orders"));

  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("ping", [](const json&, const aw::job_context&) {});
  int port = 0;
  std::unique_ptr<aw::test::worker_node> node;
  // The kernel's free port may be taken again before the node binds it:
  // try another.
  for (int attempt = 0; attempt < 5 && !node; ++attempt) {
    port = free_port();
    cfg.http.listen = "127.0.0.1:" + std::to_string(port);
    try {
      node = std::make_unique<aw::test::worker_node>(cfg, reg);
    } catch (const std::exception& e) {
      BOOST_TEST_MESSAGE("starting the node on port " << port
                                                      << " failed: "
                                                      << e.what());
    }
  }
  BOOST_REQUIRE(node);
  auto& rt = node->rt();

  // Jobs due in an hour (they stay put): two in default, three in orders.
  // Ids are per database: both start at 1.
  aw::insert_options later;
  later.run_at = std::chrono::system_clock::now() + 1h;
  std::vector<int64_t> main_ids;
  std::vector<int64_t> order_ids;
  for (int i = 0; i < 2; ++i)
    main_ids.push_back(rt.enqueue("ping", json::object(), later));
  later.queue = "orders";
  for (int i = 0; i < 3; ++i)
    order_ids.push_back(rt.enqueue("ping", json::object(), later));
  BOOST_REQUIRE(main_ids[0] == order_ids[0]); // the same id in each

  // The session lists the databases, default first, and no URL.
  auto session = get(port, "/api/session");
  BOOST_REQUIRE(session.status == 200);
  BOOST_TEST(session.body["databases"]
             == (json{"default", "gone", "orders"}));
  BOOST_TEST(session.body["default_database"] == "default");
  BOOST_TEST(!contains(session.body.dump(), "postgresql://"));

  // Jobs: absent or "default" is [database]; "orders" the other one.
  auto listed = get(port, "/api/jobs");
  BOOST_REQUIRE(listed.status == 200);
  BOOST_TEST(ids_of(listed.body["jobs"]) == main_ids);
  BOOST_TEST(names_of(listed.body["jobs"], "queue")
             == (std::set<std::string>{"default"}));
  BOOST_TEST(ids_of(get(port, "/api/jobs?database=default").body["jobs"])
             == main_ids);
  BOOST_TEST(ids_of(get(port, "/api/jobs?database=").body["jobs"])
             == main_ids);
  auto in_orders = get(port, "/api/jobs?database=orders&state=scheduled");
  BOOST_REQUIRE(in_orders.status == 200);
  BOOST_TEST(ids_of(in_orders.body["jobs"]) == order_ids);
  BOOST_TEST(names_of(in_orders.body["jobs"], "queue")
             == (std::set<std::string>{"orders"}));
  // One job: only in the database named.
  auto third = std::to_string(order_ids[2]);
  BOOST_TEST(get(port, "/api/jobs/" + third + "?database=orders")
               .body["job"]["queue"]
             == "orders");
  auto not_here = get(port, "/api/jobs/" + third);
  BOOST_TEST(not_here.status == 404);
  BOOST_TEST(contains(not_here.body.value("error", ""),
                      "in database 'default'"),
             not_here.body.dump());

  // An unknown name: 400 naming it and the configured names, for reads
  // and actions alike (nothing changed, nothing audited).
  for (auto* path : {"/api/jobs?database=nope", "/api/overview?database=nope",
                     "/api/audit?database=nope"}) {
    auto r = get(port, path);
    BOOST_TEST(r.status == 400, path);
    auto error = r.body.value("error", "");
    BOOST_TEST(contains(error, "'nope'"), error);
    BOOST_TEST(contains(error, "default, gone, orders"), error);
    BOOST_TEST(!contains(error, "postgresql://"), error);
  }
  auto refused = post(port, "/api/jobs/" + std::to_string(main_ids[0])
                              + "/cancel?database=nope");
  BOOST_TEST(refused.status == 400);
  BOOST_TEST(contains(refused.body.value("error", ""), "'nope'"));

  // An action goes to the database named, its audit row with it.
  auto same_id = std::to_string(order_ids[0]);
  auto cancelled = post(port, "/api/jobs/" + same_id + "/cancel?database=orders");
  BOOST_TEST(cancelled.status == 200, cancelled.body.dump());
  BOOST_TEST(orders.scalar("SELECT count(*) FROM jobs_live WHERE id = " + same_id
                           + " AND state = 'cancelled'")
             == 1);
  BOOST_TEST(main.scalar("SELECT count(*) FROM jobs_live WHERE id = " + same_id
                         + " AND state = 'scheduled'")
             == 1);
  BOOST_TEST(orders.scalar("SELECT count(*) FROM audit_log WHERE action = "
                           "'job.cancel'")
             == 1);
  BOOST_TEST(main.scalar("SELECT count(*) FROM audit_log") == 0);
  BOOST_TEST(get(port, "/api/audit?database=orders").body["entries"].size()
             == 1u);
  BOOST_TEST(get(port, "/api/audit").body["entries"].empty());
  // Without the parameter: the default database.
  auto main_cancel = post(port, "/api/jobs/" + same_id + "/cancel");
  BOOST_TEST(main_cancel.status == 200, main_cancel.body.dump());
  BOOST_TEST(main.scalar("SELECT count(*) FROM jobs_live WHERE id = " + same_id
                         + " AND state = 'cancelled'")
             == 1);
  BOOST_TEST(main.scalar("SELECT count(*) FROM audit_log") == 1);
  BOOST_TEST(orders.scalar("SELECT count(*) FROM audit_log") == 1);
  // A retry, too (the job then runs in its own database).
  auto retried = post(port, "/api/jobs/" + same_id + "/retry?database=orders");
  BOOST_TEST(retried.status == 200, retried.body.dump());
  BOOST_TEST(orders.scalar("SELECT count(*) FROM audit_log WHERE action = "
                           "'job.retry'")
             == 1);
  BOOST_TEST(main.scalar("SELECT count(*) FROM jobs_live WHERE id = " + same_id
                         + " AND state = 'cancelled'")
             == 1);

  // Dead letters, their count and a bulk purge: the database named.
  orders.exec("INSERT INTO dead_letter_jobs (original_job_id, kind, queue, "
              "args, priority, attempt, max_attempts, error_count, "
              "last_error_message, created_at) VALUES "
              "(nextval('jobs_id_seq'), 'charge', 'orders', '{}', 0, 3, 3, 3, "
              "'card 42 declined', now())");
  BOOST_TEST(get(port, "/api/dead-letters?database=orders")
               .body["dead_letters"]
               .size()
             == 1u);
  BOOST_TEST(get(port, "/api/dead-letters").body["dead_letters"].empty());
  BOOST_TEST(get(port, "/api/dead-letters/count?database=orders&kind=charge")
               .body["count"]
             == 1);
  BOOST_TEST(get(port, "/api/dead-letters/count?kind=charge").body["count"]
             == 0);
  BOOST_TEST(get(port, "/api/failures?database=orders").body["groups"].size()
             == 1u);
  BOOST_TEST(get(port, "/api/failures").body["groups"].empty());
  auto purged = post(port, "/api/dead-letters/purge?database=orders",
                     {{"all", true}});
  BOOST_TEST(purged.status == 200, purged.body.dump());
  BOOST_TEST(purged.body["purged"] == 1);
  BOOST_TEST(orders.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
  BOOST_TEST(orders.scalar("SELECT count(*) FROM audit_log WHERE action = "
                           "'dead_letter.purge'")
             == 1);

  // Queue controls: in the queue's own database; another is refused.
  auto elsewhere = post(port, "/api/queues/pause", {{"queue", "orders"}});
  BOOST_TEST(elsewhere.status == 400);
  BOOST_TEST(contains(elsewhere.body.value("error", ""),
                      "lives in database 'orders'"),
             elsewhere.body.dump());
  auto paused = post(port, "/api/queues/pause?database=orders",
                     {{"queue", "orders"}});
  BOOST_TEST(paused.status == 200, paused.body.dump());
  BOOST_TEST(orders.scalar("SELECT count(*) FROM queue_controls WHERE queue = "
                           "'orders' AND paused_at IS NOT NULL")
             == 1);
  BOOST_TEST(main.scalar("SELECT count(*) FROM queue_controls WHERE paused_at "
                         "IS NOT NULL")
             == 0);

  // Overview: the queues of the database named, their sample, their
  // controls, this node's throughput of them, the database's readiness.
  json overview;
  BOOST_TEST(aw::test::wait_until(
               [&] {
                 overview = get(port, "/api/overview?database=orders").body;
                 for (auto& r : overview.value("queues", json::array()))
                   if (r["queue"] == "orders" && r["scheduled"] == 2)
                     return true;
                 return false;
               },
               20s),
             overview.dump());
  BOOST_TEST(names_of(overview["queues"], "queue")
             == (std::set<std::string>{"orders"}));
  BOOST_TEST(overview["queues"][0]["paused"] == true);
  BOOST_TEST(overview["queues"][0]["here"]["concurrency"] == 2);
  BOOST_TEST(overview["queues"][0]["unserved"] == 0);
  BOOST_TEST(overview["database"] == "orders");
  BOOST_TEST(overview["ready"].is_object());
  BOOST_TEST(!overview["throughput"]["queues"].contains("default"));
  auto main_overview = get(port, "/api/overview").body;
  BOOST_TEST(names_of(main_overview["queues"], "queue")
             == (std::set<std::string>{"default"}));
  BOOST_TEST(main_overview["queues"][0]["paused"] == false);
  BOOST_TEST(!main_overview["throughput"]["queues"].contains("orders"));

  // Nodes: this node with its queues of that database; that database's
  // registered processes.
  auto nodes = get(port, "/api/nodes?database=orders").body;
  BOOST_TEST(names_of(nodes["nodes"][0]["queues"], "queue")
             == (std::set<std::string>{"orders"}));
  BOOST_TEST(nodes["cluster"].size() == 1u);
  BOOST_TEST(names_of(get(port, "/api/nodes").body["nodes"][0]["queues"],
                      "queue")
             == (std::set<std::string>{"default"}));

  // Schedules: those whose queue lives in that database.
  BOOST_TEST(names_of(get(port, "/api/schedules?database=orders")
                        .body["schedules"],
                      "name")
             == (std::set<std::string>{"nightly_orders"}));
  BOOST_TEST(names_of(get(port, "/api/schedules").body["schedules"], "name")
             == (std::set<std::string>{"nightly_main"}));

  // A database that cannot be reached: 503 naming it, no URL; the default
  // one goes on.
  for (auto* path : {"/api/jobs?database=gone", "/api/overview?database=gone",
                     "/api/schedules?database=gone"}) {
    auto r = get(port, path);
    BOOST_TEST(r.status == 503, path);
    auto error = r.body.value("error", "");
    BOOST_TEST(contains(error, "database unreachable (database 'gone')"),
               error);
    BOOST_TEST(!contains(error, "postgresql://"), error);
  }
  auto acted = post(port, "/api/jobs/1/cancel?database=gone");
  BOOST_TEST(acted.status == 503);
  BOOST_TEST(get(port, "/api/jobs").status == 200);
  BOOST_TEST(get(port, "/api/overview").status == 200);
}

BOOST_AUTO_TEST_SUITE_END()
