// worker_nodes and `actor-worker nodes`: real worker processes register at
// start, refresh with their heartbeat, leave at a graceful stop, and are
// shown dead once killed and not seen for the reclaim window.

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_process.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"

using namespace std::chrono_literals;
using aw::test::background_process;
using aw::test::contains;
using aw::test::run_bounded;
using aw::test::temp_file;

namespace {

std::string node_toml(const std::string& node) {
  return "[worker]\nnode = \"" + node
         + "\"\nheartbeat_interval = \"500ms\"\nreclaim_window = \"2s\"\n"
           "[queues.default]\nconcurrency = 2\n[queues.mail]\nconcurrency = 1\n";
}

nlohmann::json nodes(const temp_file& config, const std::string& url) {
  auto r = run_bounded({"nodes", "--config", config.path, "--json"}, url);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "nodes failed: " << r.err);
  return nlohmann::json::parse(r.out);
}

} // namespace

BOOST_AUTO_TEST_SUITE(nodes_test)

BOOST_AUTO_TEST_CASE(processes_register_refresh_leave_and_die) {
  aw::test::fresh_database db;
  temp_file a_toml{node_toml("a")};
  temp_file b_toml{node_toml("b")};
  background_process a{{"run", "--config", a_toml.path}, db.url};
  background_process b{{"run", "--config", b_toml.path}, db.url};
  nlohmann::json rows;
  BOOST_REQUIRE_MESSAGE(aw::test::wait_until(
                          [&] {
                            rows = nodes(a_toml, db.url);
                            return rows.size() == 2;
                          },
                          30s),
                        "two rows never showed: " << rows.dump());
  // JSON: an array of objects keyed by the column names, plus alive.
  std::set<std::string> keys;
  for (auto& [k, v] : rows[0].items())
    keys.insert(k);
  BOOST_TEST(keys
               == (std::set<std::string>{"alive", "host", "last_seen_at",
                                         "leader", "node", "pid", "queues",
                                         "running", "started_at", "version",
                                         "worker_id"}),
             boost::test_tools::per_element());
  BOOST_TEST(rows[0]["node"] == "a");
  BOOST_TEST(rows[1]["node"] == "b");
  BOOST_TEST(rows[0]["alive"] == true);
  BOOST_TEST(rows[0]["pid"] == a.pid());
  BOOST_TEST(rows[0]["queues"].dump() == R"(["default","mail"])");
  BOOST_TEST(contains(rows[0]["worker_id"].get<std::string>(), "a:"));
  // Refreshed with the heartbeat.
  auto seen = rows[0]["last_seen_at"];
  BOOST_TEST(aw::test::wait_until(
    [&] { return nodes(a_toml, db.url)[0]["last_seen_at"] != seen; }, 10s));
  // The text form names both.
  auto text = run_bounded({"nodes", "--config", a_toml.path}, db.url);
  BOOST_TEST(contains(text.out, "a  alive"), text.out);
  BOOST_TEST(contains(text.out, "b  alive"), text.out);

  // A graceful stop takes the row away.
  a.signal(SIGTERM);
  BOOST_REQUIRE(a.wait_exit(30s).value_or(-1) == 0);
  rows = nodes(b_toml, db.url);
  BOOST_REQUIRE_EQUAL(rows.size(), 1u);
  BOOST_TEST(rows[0]["node"] == "b");
  // kill -9: the row stays, dead once the reclaim window passed.
  b.signal(SIGKILL);
  b.wait_exit(30s);
  BOOST_TEST(aw::test::wait_until(
    [&] {
      auto r = nodes(b_toml, db.url);
      return r.size() == 1 && r[0]["alive"] == false;
    },
    20s));
  auto dead = run_bounded({"nodes", "--config", b_toml.path}, db.url);
  BOOST_TEST(contains(dead.out, "b  DEAD"), dead.out);
}

BOOST_AUTO_TEST_SUITE_END()
