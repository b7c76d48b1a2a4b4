// `actor-worker --config FILE check`: validates a whole configuration file
// (every node of a cluster file) without connecting anywhere, and prints
// what each node would run.

#include "actor_worker/app/cli/cli.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "actor_worker/app/builtin_kinds.hpp"
#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/toml_kinds.hpp"

namespace aw::cli {

namespace {

nlohmann::json describe(const std::string& name, const runtime_config& cfg) {
  nlohmann::json queues = nlohmann::json::array();
  for (auto& q : cfg.queues) {
    nlohmann::json one{{"name", q.name}, {"concurrency", q.concurrency}};
    if (cfg.sharded())
      one["database"] = cfg.database_of(q.name);
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
    if (q.contains("database"))
      queues += ", database " + q["database"].get<std::string>();
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

/// The [periodic.NAME] schedules (the same on every node), each with its
/// next tick and, when the binary cannot run its kind (neither built in
/// nor a [kinds.NAME]), a note saying so.
nlohmann::json describe_periodic(const runtime_config& cfg) {
  registry builtin;
  register_builtin_kinds(builtin, "postgresql:///unused");
  auto known = builtin.kinds();
  for (auto& k : cfg.kinds)
    known.push_back(k.name);
  nlohmann::json out = nlohmann::json::array();
  auto now = std::chrono::system_clock::now();
  for (auto& p : cfg.periodic) {
    auto next = p.schedule().next_after(now);
    nlohmann::json one{{"name", p.name},
                       {"cron", p.cron},
                       {"timezone", p.timezone},
                       {"kind", p.kind},
                       {"queue", p.queue},
                       {"priority", p.priority},
                       {"catch_up", to_string(p.catch_up)},
                       {"next_tick", next ? nlohmann::json(format_utc(*next))
                                          : nlohmann::json(nullptr)}};
    if (std::find(known.begin(), known.end(), p.kind) == known.end())
      one["note"] = "kind '" + p.kind
                    + "' is neither built in nor a [kinds.NAME]: a process "
                      "that registers it (an embedding application) must "
                      "serve queue '"
                    + p.queue + "'";
    out.push_back(std::move(one));
  }
  return out;
}

} // namespace

int check_config(const std::string& file, bool json) {
  if (file.empty())
    throw usage_error("check: no file to check: pass --config FILE");
  auto cluster = load_cluster(file);
  // What `run` refuses, `check` refuses: a [kinds.NAME] of a built-in name.
  {
    registry builtin;
    register_builtin_kinds(builtin, "postgresql:///unused");
    refuse_registered_names(builtin, cluster.defaults.kinds);
  }
  // The nodes of a file share [http] listen: two of them on one host
  // cannot both serve it (the second one stops, exit 2).
  std::vector<std::string> warnings;
  if (cluster.nodes.size() > 1) {
    std::map<std::string, std::vector<std::string>> by_listen;
    for (auto& n : cluster.nodes)
      if (!n.config.http.listen.empty())
        by_listen[n.config.http.listen].push_back(n.name);
    for (auto& [listen, names] : by_listen)
      if (names.size() > 1) {
        std::string list;
        for (auto& name : names)
          list += (list.empty() ? "" : ", ") + name;
        warnings.push_back("nodes " + list + " share the http listen address "
                           + listen + ": only one of them can run on a host "
                             "(the others stop, exit 2); run each on a host "
                             "of its own");
      }
  }
  for (auto& w : warnings)
    std::cerr << "warning: " << w << "\n";
  nlohmann::json nodes = nlohmann::json::array();
  if (cluster.nodes.empty())
    nodes.push_back(describe(cluster.defaults.worker.node, cluster.defaults));
  for (auto& n : cluster.nodes)
    nodes.push_back(describe(n.name, n.config));
  auto periodic = describe_periodic(cluster.defaults);
  if (json) {
    // The databases by name, never their URLs (they may hold passwords).
    std::cout << nlohmann::json{{"file", file},
                                {"cluster", cluster.name},
                                {"databases",
                                 cluster.defaults.database_names()},
                                {"nodes", nodes},
                                {"periodic", periodic},
                                {"warnings", warnings}}
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
  if (cluster.defaults.sharded()) {
    std::string names;
    for (auto& n : cluster.defaults.database_names())
      names += (names.empty() ? "" : ", ") + n;
    std::cout << "  databases: " << names << "\n";
  }
  for (auto& n : nodes)
    std::cout << "  " << summary(n) << "\n";
  for (auto& p : periodic) {
    std::cout << "  periodic " << p["name"].get<std::string>() << ": cron \""
              << p["cron"].get<std::string>() << "\" ("
              << p["timezone"].get<std::string>() << "), kind "
              << p["kind"].get<std::string>() << ", queue "
              << p["queue"].get<std::string>() << ", catch_up "
              << p["catch_up"].get<std::string>() << ", next tick "
              << (p["next_tick"].is_null() ? std::string{"none"}
                                           : p["next_tick"].get<std::string>())
              << "\n";
    if (p.contains("note"))
      std::cout << "    note: " << p["note"].get<std::string>() << "\n";
  }
  return exit_ok;
}

} // namespace aw::cli
