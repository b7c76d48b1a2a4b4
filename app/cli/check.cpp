// `actor-worker --config FILE check`: validates a whole configuration file
// (every node of a cluster file) without connecting anywhere, and prints
// what each node would run.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>

namespace aw::cli {

namespace {

nlohmann::json describe(const std::string& name, const runtime_config& cfg) {
  nlohmann::json queues = nlohmann::json::array();
  for (auto& q : cfg.queues) {
    nlohmann::json one{{"name", q.name}, {"concurrency", q.concurrency}};
    if (q.deadline.count() > 0)
      one["deadline"] = format_duration(q.deadline);
    // The cluster-wide limits it would write into queue_controls.
    if (q.global_concurrency > 0)
      one["global_concurrency"] = q.global_concurrency;
    if (q.rate_limit > 0)
      one["rate_limit"] = std::to_string(q.rate_limit)
                          + (q.rate_period == std::chrono::minutes{1} ? "/m"
                                                                      : "/s");
    queues.push_back(std::move(one));
  }
  nlohmann::json kinds = nlohmann::json::array();
  for (auto& k : cfg.kinds)
    kinds.push_back({{"name", k.name}, {"type", k.command ? "command" : "http"}});
  return {{"node", name},
          {"queues", std::move(queues)},
          {"kinds", std::move(kinds)},
          {"poll_interval", format_duration(cfg.worker.poll_interval)},
          {"heartbeat_interval", format_duration(cfg.worker.heartbeat_interval)},
          {"reclaim_window", format_duration(cfg.worker.reclaim_window)},
          {"shutdown_drain", format_duration(cfg.worker.shutdown_drain)},
          {"http", cfg.http.listen}};
}

std::string summary(const nlohmann::json& node) {
  std::string queues;
  for (auto& q : node["queues"]) {
    queues += (queues.empty() ? "" : ", ") + q["name"].get<std::string>()
              + " (concurrency " + std::to_string(q["concurrency"].get<int>());
    if (q.contains("deadline"))
      queues += ", deadline " + q["deadline"].get<std::string>();
    if (q.contains("global_concurrency"))
      queues += ", global_concurrency "
                + std::to_string(q["global_concurrency"].get<int>());
    if (q.contains("rate_limit"))
      queues += ", rate_limit " + q["rate_limit"].get<std::string>();
    queues += ")";
  }
  std::string kinds;
  for (auto& k : node["kinds"])
    kinds += (kinds.empty() ? "" : ", ") + k["name"].get<std::string>() + " ("
             + k["type"].get<std::string>() + ")";
  std::string out = "node " + node["node"].get<std::string>() + ": queues "
                    + queues + "; kinds: built-in"
                    + (kinds.empty() ? "" : ", " + kinds)
                    + "; heartbeat " + node["heartbeat_interval"].get<std::string>()
                    + ", reclaim window "
                    + node["reclaim_window"].get<std::string>();
  if (!node["http"].get<std::string>().empty())
    out += "; http " + node["http"].get<std::string>();
  return out;
}

} // namespace

int check_config(const std::string& file, bool json) {
  if (file.empty())
    throw usage_error("check: no file to check: pass --config FILE");
  auto cluster = load_cluster(file);
  nlohmann::json nodes = nlohmann::json::array();
  if (cluster.nodes.empty())
    nodes.push_back(describe(cluster.defaults.worker.node, cluster.defaults));
  for (auto& n : cluster.nodes)
    nodes.push_back(describe(n.name, n.config));
  if (json) {
    std::cout << nlohmann::json{{"file", file},
                                {"cluster", cluster.name},
                                {"nodes", nodes}}
                   .dump(2)
              << "\n";
    return exit_ok;
  }
  std::cout << file << ": valid; "
            << (cluster.nodes.empty()
                  ? std::string{"a single node's configuration (no [nodes])"}
                  : "cluster '" + cluster.name + "', "
                      + std::to_string(cluster.nodes.size()) + " node(s)")
            << "\n";
  for (auto& n : nodes)
    std::cout << "  " << summary(n) << "\n";
  return exit_ok;
}

} // namespace aw::cli
