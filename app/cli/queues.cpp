// `actor-worker queues [--json]`, `queues pause QUEUE`, `queues resume
// QUEUE`: the cluster-wide queue controls (docs/clusters.md, "Queue controls").

#include "actor_worker/app/cli/cli.hpp"

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_queues.hpp"

namespace aw::cli {

namespace {

std::vector<std::string> configured_queues(const runtime_config& cfg) {
  std::vector<std::string> names;
  for (auto& q : cfg.queues)
    names.push_back(q.name);
  return names;
}

} // namespace

int list_queues(const runtime_config& cfg, const std::string& database,
                bool json) {
  // Every database in turn (or the one named), each with the configured
  // queues that live there; rows name their database when there are
  // several.
  nlohmann::json rows = nlohmann::json::array();
  for (auto& name : listed_databases(cfg, database)) {
    auto part = cfg.for_database(name);
    pqxx::connection conn{part.database.url};
    auto some = aw::storage::queues_overview(conn, configured_queues(part),
                                             cfg.worker.reclaim_window);
    for (auto& row : some) {
      if (cfg.sharded())
        row["database"] = name;
      rows.push_back(std::move(row));
    }
  }
  if (json) {
    std::cout << rows.dump() << std::endl;
    return exit_ok;
  }
  for (auto& q : rows) {
    std::string nodes;
    for (auto& [node, n] : q["running_by_node"].items())
      nodes += (nodes.empty() ? "" : ",") + node + "=" + std::to_string(n.get<int64_t>());
    auto limit = [](const nlohmann::json& v) {
      return v.is_null() ? std::string{"none"}
                         : v.is_string() ? v.get<std::string>()
                                         : std::to_string(v.get<int64_t>());
    };
    if (q.contains("database"))
      std::cout << "[" << q["database"].get<std::string>() << "] ";
    std::cout << aw::printable(q["queue"].get<std::string>()) << "  "
              << (q["paused"].get<bool>()
                    ? "PAUSED since " + q["paused_at"].get<std::string>()
                    : std::string{"active"})
              << "  available " << q["available"].get<int64_t>()
              << "  scheduled " << q["scheduled"].get<int64_t>()
              << "  running " << q["running"].get<int64_t>()
              << "  waiting_external " << q["waiting_external"].get<int64_t>()
              << "  dead_lettered " << q["dead_lettered"].get<int64_t>()
              << "  oldest_available "
              << static_cast<int64_t>(
                   q["oldest_available_age_seconds"].get<double>())
              << "s  unserved " << q["unserved"].get<int64_t>()
              << "  global_concurrency " << limit(q["global_concurrency"])
              << "  rate_limit " << limit(q["rate_limit"])
              << "  running_by_node " << aw::printable(nodes.empty() ? "-" : nodes)
              << "\n";
  }
  if (rows.empty())
    std::cerr << "no queue is known yet\n";
  return exit_ok;
}

int control_queue_cmd(const runtime_config& cfg, const std::string& queue,
                      bool pause) {
  pqxx::connection conn{cfg.database.url};
  pqxx::work tx{conn, "aw_queue_control"};
  auto names = configured_queues(cfg);
  bool configured = std::find(names.begin(), names.end(), queue) != names.end();
  if (!configured && !aw::storage::queue_known(tx, queue)) {
    spdlog::error("queues {}: unknown queue '{}': it is not in the "
                  "configuration, no worker serves it and no job has it "
                  "(nothing changed)",
                  pause ? "pause" : "resume", aw::printable(queue));
    return exit_failure;
  }
  if (pause) {
    auto since = aw::storage::pause_queue(tx, queue);
    tx.commit();
    std::cout << "queue " << aw::printable(queue) << " paused (since "
              << since << "): no node starts a new job of it; running jobs "
              << "finish" << std::endl;
  } else {
    bool was = aw::storage::resume_queue(tx, queue);
    tx.commit();
    std::cout << "queue " << aw::printable(queue)
              << (was ? " resumed" : " was not paused; it runs") << std::endl;
  }
  return exit_ok;
}

} // namespace aw::cli
