// Cluster files: one TOML for every node ([cluster], [nodes.NAME] over the
// top level's defaults), node selection, and errors that name file, line
// and key, the cross-key ones included.

#include <boost/test/unit_test.hpp>

#include "actor_worker/config/config.hpp"
#include "unit/config_errors.hpp"

using namespace std::chrono_literals;

namespace {

const char* const three_nodes = R"(
[cluster]
name = "prod"

[worker]
shutdown_drain = "10s"

[queues.default]
concurrency = 10

[queues.mail]
concurrency = 4
deadline = "1m"

[nodes.a]
queues = ["default", "mail"]

[nodes.b]
max_retries = 5
[nodes.b.queues.mail]
concurrency = 16

[nodes.c]
heartbeat_interval = "20s"
)";

std::string error_of(const std::string& text) {
  return aw_test::config_error_of(text, "cluster.toml");
}

using aw_test::contains;

} // namespace

BOOST_AUTO_TEST_SUITE(cluster_config_test)

BOOST_AUTO_TEST_CASE(nodes_take_the_top_level_and_their_own_keys) {
  auto c = aw::parse_cluster(three_nodes, "cluster.toml");
  BOOST_TEST(c.name == "prod");
  BOOST_REQUIRE(c.nodes.size() == 3u);
  auto& a = c.nodes[0].config;
  auto& b = c.nodes[1].config;
  auto& n3 = c.nodes[2].config;
  BOOST_TEST(c.nodes[0].name == "a");
  BOOST_TEST(c.nodes[1].where == "cluster.toml:18");
  // Every node: its own name, the shared [worker] keys.
  BOOST_TEST(a.worker.node == "a");
  BOOST_TEST(b.worker.node == "b");
  BOOST_TEST((a.worker.shutdown_drain == 10s));
  BOOST_TEST((b.worker.shutdown_drain == 10s));
  // a: both queues, as the top level defines them.
  BOOST_REQUIRE(a.queues.size() == 2u);
  BOOST_TEST(a.queues[1].name == "mail");
  BOOST_TEST(a.queues[1].concurrency == 4);
  BOOST_TEST((a.queues[1].deadline == 1min));
  // b: its own max_retries; only mail, with its own concurrency and the
  // top level's deadline.
  BOOST_TEST(b.worker.max_retries == 5);
  BOOST_TEST(a.worker.max_retries == 20);
  BOOST_REQUIRE(b.queues.size() == 1u);
  BOOST_TEST(b.queues[0].concurrency == 16);
  BOOST_TEST((b.queues[0].deadline == 1min));
  // c: every queue of the top level, its own heartbeat.
  BOOST_TEST(n3.queues.size() == 2u);
  BOOST_TEST((n3.worker.heartbeat_interval == 20s));
}

BOOST_AUTO_TEST_CASE(a_node_is_picked_by_flag_then_worker_node_then_host) {
  auto c = aw::parse_cluster(three_nodes, "cluster.toml");
  BOOST_TEST(aw::select_node(c, "b").worker.max_retries == 5);
  auto named = aw::parse_cluster(std::string{three_nodes} + "", "cluster.toml");
  named.named_node = "c";
  BOOST_TEST((aw::select_node(named, "").worker.heartbeat_interval == 20s));
  // A name the file does not define: the error lists the ones it does.
  try {
    aw::select_node(c, "zz");
    BOOST_FAIL("node zz was accepted");
  } catch (const aw::config_error& e) {
    std::string m = e.what();
    BOOST_TEST(contains(m, "node 'zz' (from --node) is not defined"), m);
    BOOST_TEST(contains(m, "its nodes are: a, b, c"), m);
  }
  // The host name, when nothing else names the node.
  try {
    aw::select_node(c, "");
  } catch (const aw::config_error& e) {
    BOOST_TEST(contains(e.what(), "'" + aw::local_host_name() + "' (from the host name"));
  }
  // A file without [nodes] works as always; --node names the node.
  auto single = aw::parse_cluster("[queues.default]\nconcurrency = 3\n", "w.toml");
  BOOST_TEST(single.nodes.empty());
  BOOST_TEST(aw::select_node(single, "").worker.node == "node");
  BOOST_TEST(aw::select_node(single, "n7").worker.node == "n7");
  BOOST_TEST(aw::select_node(single, "").queues.at(0).concurrency == 3);
}

BOOST_AUTO_TEST_CASE(every_error_names_file_line_and_key) {
  struct bad {
    const char* what;
    std::string toml;
    std::string expected;
  };
  const std::vector<bad> cases{
    {"unknown node key", "[nodes.a]\nbogus = 1\n",
     "cluster.toml:2: key 'nodes.a.bogus': unknown key"},
    {"node may not rename itself", "[nodes.a]\nnode = \"b\"\n",
     "cluster.toml:2: key 'nodes.a.node': unknown key"},
    {"wrong type in a node", "[nodes.a]\nmax_retries = \"x\"\n",
     "cluster.toml:2: key 'nodes.a.max_retries': expected an integer"},
    {"queues not names", "[nodes.a]\nqueues = [1]\n",
     "cluster.toml:2: key 'nodes.a.queues': expected queue names"},
    {"a queue twice", "[nodes.a]\nqueues = [\"q\", \"q\"]\n",
     "key 'nodes.a.queues': queue 'q' is listed twice"},
    {"no queue", "[nodes.a]\nqueues = []\n",
     "key 'nodes.a.queues': a node serves at least one queue"},
    {"per-node queue key", "[nodes.a.queues.mail]\nconcurency = 3\n",
     "cluster.toml:2: key 'nodes.a.queues.mail.concurency': unknown key"},
    {"cross-key, set by the node", "[nodes.a]\nreclaim_window = \"10s\"\n",
     "cluster.toml:2: key 'nodes.a.reclaim_window': worker.reclaim_window"},
    {"cross-key, half from the top level",
     "[worker]\nreclaim_window = \"60s\"\n[nodes.a]\nheartbeat_interval = \"30s\"\n",
     "cluster.toml:2: key 'worker.reclaim_window'"},
    {"unknown cluster key", "[cluster]\nnam = \"x\"\n",
     "cluster.toml:2: key 'cluster.nam': unknown key"},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      auto m = error_of(c.toml);
      BOOST_TEST(contains(m, c.expected), m);
    }
  }
}

BOOST_AUTO_TEST_CASE(queue_names_follow_the_rule_of_kind_names) {
  using aw_test::contains;
  const std::string rule = "a queue name must be 1 to 200 bytes without "
                           "control characters";
  auto long_name = std::string(201, 'q');
  // The top level's [queues.NAME] (a quoted key may hold anything).
  auto e = error_of("[queues.\"mail\\nINFO forged\"]\nconcurrency = 1\n");
  BOOST_TEST(contains(e, "cluster.toml:1: key 'queues.mail"), e);
  BOOST_TEST(contains(e, rule), e);
  BOOST_TEST(contains(e, "contains a control character"), e);
  e = error_of("[queues." + long_name + "]\nconcurrency = 1\n");
  BOOST_TEST(contains(e, rule), e);
  BOOST_TEST(contains(e, "is 201 bytes long"), e);
  // A node's list of queues and its [nodes.N.queues.NAME] tables.
  e = error_of("[nodes.a]\nqueues = [\"ok\", \"bad\\tname\"]\n");
  BOOST_TEST(contains(e, "cluster.toml:2: key 'nodes.a.queues'"), e);
  BOOST_TEST(contains(e, rule), e);
  e = error_of("[nodes.a.queues." + long_name + "]\nconcurrency = 2\n");
  BOOST_TEST(contains(e, rule), e);
  // 200 bytes are taken, as at enqueue.
  BOOST_TEST(error_of("[queues." + std::string(200, 'q') + "]\nconcurrency = 1\n")
               == "");
  BOOST_TEST(aw::name_problem(std::string(200, 'q')).empty());
  BOOST_TEST(aw::name_problem(long_name) == "is 201 bytes long, more than the 200 allowed");
}

BOOST_AUTO_TEST_SUITE_END()
