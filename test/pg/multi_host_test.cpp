// Multi-host connection strings (issue 12, failover): a URL that names a
// host that refuses connections first and the test server second, with
// target_session_attrs=read-write, as a client of a primary and its standby
// is configured. libpq tries the hosts in order and keeps the first that
// accepts writes; nothing of ours may parse, rewrite or trip over such a
// URL. migrate, enqueue, the admin commands, `run` (claims, outcomes and
// the LISTEN connection) and the embedding API all work through it.
// Failing over to another server under running workers is
// test/fault/failover_test.cpp.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>

#include <pqxx/pqxx>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "cli_process.hpp"
#include "pg_fixture.hpp"
#include "refusing_port.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;

using aw::test::refusing_port;

namespace {

/// `postgresql://USER@127.0.0.1:DEAD,HOST:PORT/DB?target_session_attrs=read-write`
/// for `db`: the refusing port first, the test server second.
std::string multi_host_url(const aw::test::fresh_database& db,
                           const refusing_port& dead) {
  pqxx::connection conn{db.url};
  pqxx::nontransaction tx{conn};
  auto row = tx.exec1("SELECT current_user, host(inet_server_addr()), "
                      "inet_server_port(), current_database()");
  return "postgresql://" + row[0].as<std::string>() + "@127.0.0.1:"
         + std::to_string(dead.port()) + "," + row[1].as<std::string>() + ":"
         + std::to_string(row[2].as<int>()) + "/" + row[3].as<std::string>()
         + "?target_session_attrs=read-write";
}

int64_t job_id(const aw::test::command_result& r) {
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "enqueue failed: " << r.err);
  return std::stoll(r.out);
}

} // namespace

BOOST_AUTO_TEST_SUITE(multi_host_test)

BOOST_AUTO_TEST_CASE(migrate_enqueue_admin_and_run_through_a_multi_host_url) {
  aw::test::fresh_database db{false}; // migrated below, through the URL
  refusing_port dead;
  auto url = multi_host_url(db, dead);
  BOOST_TEST_MESSAGE("URL: " << url);
  // The first host really refuses: the URL works only by trying the next.
  BOOST_CHECK_THROW(pqxx::connection{"postgresql://127.0.0.1:"
                                     + std::to_string(dead.port()) + "/x"},
                    pqxx::broken_connection);

  auto migrated = aw::test::run_bounded({"migrate"}, url);
  BOOST_REQUIRE_MESSAGE(migrated.exit_code == 0, "migrate: " << migrated.err);
  BOOST_TEST(db.scalar("SELECT count(*) FROM actor_worker_migrations") > 0);

  auto first = job_id(aw::test::run_bounded({"enqueue", "noop"}, url));
  auto shown = aw::test::run_bounded({"jobs", "show", std::to_string(first),
                                      "--json"},
                                     url);
  BOOST_TEST(shown.exit_code == 0, shown.err);
  BOOST_TEST(shown.out.find("\"available\"") != std::string::npos, shown.out);
  auto listed = aw::test::run_bounded({"dlq", "list"}, url);
  BOOST_TEST(listed.exit_code == 0, listed.err);

  // A worker whose idle poll would take 30 s: the second job below is
  // picked up at once only if its LISTEN connection (same URL) works.
  aw::test::temp_file cfg{"[worker]\n"
                          "node = \"multi\"\n"
                          "poll_interval = \"30s\"\n"
                          "[queues.default]\n"
                          "concurrency = 2\n"};
  aw::test::background_process worker{{"--config", cfg.path, "run"}, url};
  auto completed = [&](int64_t id) {
    return db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed' AND id = "
                     + std::to_string(id))
           == 1;
  };
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until([&] { return completed(first); }, 30s),
                        "the worker did not run the first job: " << worker.err());
  // LISTEN is up once the listener says so (or the job would wait for the
  // next idle poll, 30 s away).
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
                          [&] {
                            return db.scalar(
                                     "SELECT count(*) FROM pg_stat_activity "
                                     "WHERE datname = current_database() AND "
                                     "query LIKE 'LISTEN%'")
                                   > 0;
                          },
                          20s),
                        "no LISTEN session: " << worker.err());
  auto t0 = std::chrono::steady_clock::now();
  auto second = job_id(aw::test::run_bounded({"enqueue", "noop"}, url));
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until([&] { return completed(second); }, 20s),
                        "the NOTIFY did not wake the worker: " << worker.err());
  auto pickup = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - t0);
  BOOST_TEST_MESSAGE("second job completed " << pickup.count()
                                             << " ms after its enqueue began");
  BOOST_TEST(worker.running());
  worker.signal(SIGTERM);
  auto code = worker.wait_exit(30s);
  BOOST_REQUIRE(code.has_value());
  BOOST_TEST(*code == 0);
  auto log = worker.err();
  BOOST_TEST(log.find("[error]") == std::string::npos, log);
  BOOST_TEST(log.find("no LISTEN") == std::string::npos, log);
}

BOOST_AUTO_TEST_CASE(the_embedding_api_through_a_multi_host_url) {
  aw::test::fresh_database db;
  refusing_port dead;
  auto cfg = db.config(2);
  cfg.database.url = multi_host_url(db, dead);
  // Already migrated: a no-op through the URL.
  auto report = aw::migrate(cfg);
  BOOST_TEST(report.to_version > 0);

  std::atomic<int> ran{0};
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("ping", [&](const nlohmann::json&, const aw::job_context&) { ++ran; });
  aw::test::worker_node node{cfg, reg};
  int64_t id = 0;
  {
    pqxx::connection conn{cfg.database.url};
    pqxx::work tx{conn};
    id = aw::enqueue(tx, "ping", nlohmann::json::object());
    tx.commit();
  }
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
                          [&] {
                            return db.scalar("SELECT count(*) FROM jobs_live WHERE "
                                             "state = 'completed' AND id = "
                                             + std::to_string(id))
                                   == 1;
                          },
                          30s),
                        "the job did not complete");
  BOOST_TEST(ran.load() == 1);
}

BOOST_AUTO_TEST_SUITE_END()
