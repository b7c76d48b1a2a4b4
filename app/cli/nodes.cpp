// `actor-worker nodes [--json]`: the worker processes of the cluster.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_nodes.hpp"

namespace aw::cli {

int list_nodes(const runtime_config& cfg, const std::string& database,
               bool json) {
  // Each database has its own worker_nodes rows and its own leader.
  nlohmann::json rows = nlohmann::json::array();
  for (auto& name : listed_databases(cfg, database)) {
    pqxx::connection conn{cfg.database_named(name).url};
    for (auto& row : nlohmann::json::parse(
           aw::storage::nodes_json(conn, cfg.worker.reclaim_window))) {
      if (cfg.sharded())
        row["database"] = name;
      rows.push_back(std::move(row));
    }
  }
  if (json) {
    std::cout << rows.dump() << std::endl;
    return exit_ok;
  }
  if (rows.empty()) {
    std::cerr << "no worker process is registered\n";
    return exit_ok;
  }
  for (auto& n : rows) {
    if (n.contains("database"))
      std::cout << "[" << n["database"].get<std::string>() << "] ";
    std::string queues;
    for (auto& q : n["queues"])
      queues += (queues.empty() ? "" : ",") + q.get<std::string>();
    std::cout << aw::printable(n["node"].get<std::string>()) << "  "
              << (n["alive"].get<bool>() ? "alive" : "DEAD (not seen for the reclaim window)")
              << "  " << aw::printable(n["worker_id"].get<std::string>())
              << "  host " << aw::printable(n["host"].get<std::string>())
              << "  pid " << n["pid"].get<int>() << "  version "
              << aw::printable(n["version"].get<std::string>())
              << "  queues " << aw::printable(queues) << "  running "
              << n["running"].get<int>() << "  started "
              << n["started_at"].get<std::string>() << "  last seen "
              << n["last_seen_at"].get<std::string>()
              << (n["leader"].get<bool>() ? "  LEADER" : "") << "\n";
  }
  return exit_ok;
}

std::vector<std::string> listed_databases(const runtime_config& cfg,
                                          const std::string& database) {
  if (database.empty())
    return cfg.database_names();
  cfg.database_named(database); // throws for an unknown name
  return {database};
}

} // namespace aw::cli
