// Queues sharded across databases, through the embedding API: migrate_all
// migrates every database, one runtime serves the queues of two databases,
// enqueue routes by queue, callbacks are found in either database, and a
// follow-up into another database's queue is refused with a clear error
// (it would have to commit in its trigger's transaction). Two databases of
// the test server here; two servers, and an outage of one, are
// test/fault/sharding_test.cpp.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <string>

#include <pqxx/pqxx>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "pg_fixture.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;

namespace {

/// `main` with a second database `orders` (not migrated yet) holding the
/// queues `orders` and `invoices`.
aw::runtime_config sharded_config(const aw::test::fresh_database& main,
                                  const aw::test::fresh_database& orders) {
  auto cfg = main.config(4);
  aw::named_database db;
  db.name = "orders";
  db.settings.url = orders.url;
  db.settings.pool_size = 1;
  cfg.databases.push_back(db);
  for (const char* queue : {"orders", "invoices"}) {
    aw::queue_config q;
    q.name = queue;
    q.concurrency = 4;
    cfg.queues.push_back(q);
    cfg.queue_databases[queue] = "orders";
  }
  return cfg;
}

int64_t count(const aw::test::fresh_database& db, const std::string& where) {
  return db.scalar("SELECT count(*) FROM jobs_live WHERE " + where);
}

} // namespace

BOOST_AUTO_TEST_SUITE(sharding_test)

BOOST_AUTO_TEST_CASE(one_runtime_serves_and_routes_two_databases) {
  aw::test::fresh_database main;
  aw::test::fresh_database orders{false};
  auto cfg = sharded_config(main, orders);

  auto reports = aw::migrate_all(cfg);
  BOOST_REQUIRE(reports.size() == 2u);
  BOOST_TEST(reports[0].database == "default");
  BOOST_TEST(reports[0].report.applied.empty()); // the fixture migrated it
  BOOST_TEST(reports[1].database == "orders");
  BOOST_TEST(!reports[1].report.applied.empty());

  std::atomic<int> pinged{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("ping", [&](const nlohmann::json&, const aw::job_context&) {
    ++pinged;
  });
  reg->add_raw("park", [](const nlohmann::json&, const aw::job_context&) {
    return aw::outcome::wait_for_callback(60s);
  });
  // An order's follow-up stays in its database (queue invoices); a
  // follow-up into the default database cannot commit with it.
  reg->on_completed_enqueue<nlohmann::json>(
    "ping", [](const nlohmann::json& args, const nlohmann::json&)
              -> std::optional<aw::enqueue_request> {
      if (!args.contains("then"))
        return std::nullopt;
      aw::enqueue_request r;
      r.kind = "ping";
      r.options.queue = args.at("then").get<std::string>();
      return r;
    });
  aw::test::worker_node node{cfg, reg};
  auto& rt = node.rt();

  BOOST_TEST(rt.database_for("orders").url == orders.url);
  BOOST_TEST(rt.database_for("default").url == main.url);
  BOOST_TEST(rt.database_for("unmapped").url == main.url);

  // enqueue() routes by queue.
  aw::insert_options in_orders;
  in_orders.queue = "orders";
  auto order_id = rt.enqueue("ping", {{"then", "invoices"}}, in_orders);
  auto main_id = rt.enqueue("ping", nlohmann::json::object());
  BOOST_TEST(count(orders, "id = " + std::to_string(order_id)
                             + " AND queue = 'orders'")
             == 1);
  BOOST_TEST(count(main, "queue = 'orders'") == 0);
  std::vector<aw::enqueue_request> batch(3);
  for (auto& r : batch) {
    r.kind = "ping";
    r.options.queue = "invoices";
  }
  BOOST_TEST(rt.enqueue_many(batch).size() == 3u);
  BOOST_TEST(count(orders, "queue = 'invoices'") >= 3);
  // One transaction cannot span two databases.
  batch[1].options.queue = "default";
  try {
    rt.enqueue_many(batch);
    BOOST_FAIL("an enqueue_many across two databases was accepted");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string{e.what()}.find("cannot span two databases")
               != std::string::npos);
  }

  // Both databases' jobs run, with the follow-up in the orders database.
  BOOST_REQUIRE_MESSAGE(
    aw::test::wait_until(
      [&] {
        return count(orders, "state = 'completed'") == 5
               && count(main, "state = 'completed'") == 1;
      },
      30s),
    "not every job completed in both databases");
  BOOST_TEST(count(orders, "queue = 'invoices' AND state = 'completed'") == 4);
  BOOST_TEST(pinged.load() == 6);
  (void) main_id;

  // A follow-up from the orders database into the default one is refused:
  // the trigger is not completed, and the job says why.
  auto crossing = rt.enqueue("ping", {{"then", "default"}}, in_orders);
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return count(orders, "id = " + std::to_string(crossing)
                             + " AND error_count > 0")
             == 1;
    },
    30s));
  auto conn = orders.connect();
  auto text_of = [&](const std::string& sql) {
    pqxx::work read{*conn};
    auto r = read.exec(sql);
    return r.empty() || r[0][0].is_null() ? std::string{}
                                          : r[0][0].as<std::string>();
  };
  auto error = text_of("SELECT last_error_message FROM jobs_live WHERE id = "
                       + std::to_string(crossing));
  BOOST_TEST(error.find("queue 'default', which lives in database 'default'")
               != std::string::npos,
             error);
  BOOST_TEST(count(main, "kind = 'ping'") == 1); // nothing leaked across

  // A callback id is found in whichever database parks the job.
  auto parked = rt.enqueue("park", nlohmann::json::object(), in_orders);
  std::string callback_id;
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      callback_id = text_of("SELECT callback_id FROM jobs_live WHERE id = "
                            + std::to_string(parked)
                            + " AND state = 'waiting_external'");
      return !callback_id.empty();
    },
    20s));
  auto outcome = rt.complete_external(callback_id, {{"ok", true}});
  BOOST_TEST(outcome.row.value("state", "") == "completed");
  BOOST_CHECK_THROW(rt.complete_external(
                      "0b5e5c3e-6f1a-4c1e-9d7e-2a3b4c5d6e7f", nullptr),
                    aw::storage::callback_error);
}

BOOST_AUTO_TEST_SUITE_END()
