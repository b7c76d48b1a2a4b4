// TOML -> runtime_config. Strict: every key is known, every value has the
// right type, and every complaint names the file, line and key.
//
// The loader in parts, one per part of the configuration it reads
// (config/internal/load_parts.hpp declares what they share):
//
//   load.cpp            a file as a whole: its top level, [cluster], the
//                       [nodes.NAME] over it; picks this process's node
//   load_sections.cpp   [database], [databases.NAME], [worker], [scheduler],
//                       [queues.NAME], [http], [metrics], [log]
//   load_kinds.cpp      [kinds.NAME]
//   load_periodic.cpp   [periodic.NAME]
//   load_fields.cpp     the typed readers of one key, and where a complaint
//                       points
//   runtime_config.cpp  checks across keys; each queue's database
//   http_config.cpp     [http]'s address, allowed hosts and token
//   value_parsing.cpp   durations, sizes, rate limits and names as text

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw {

using namespace config_detail;

namespace {

/// A [nodes.NAME] section over the top level's configuration.
node_config read_node(const cluster_config& cluster, const toml::table& root,
                      const std::string& name, const toml::node& value,
                      const std::string& source) {
  const std::string p = "nodes." + name + ".";
  if (!value.is_table())
    throw config_error(where(source, value, "nodes." + name)
                       + ": expected a table ([nodes." + name + "])");
  auto& t = *value.as_table();
  node_config n;
  n.name = name;
  n.where = source + ":" + std::to_string(t.source().begin.line);
  n.config = cluster.defaults;
  auto known = worker_keys();
  known.erase("node"); // the section's name is the node's name
  known.insert("queues");
  reject_unknown(source, t, p, known);
  read_worker(source, t, p, n.config.worker);
  n.config.worker.node = name;
  // The queues it serves: a list of names, or a table of per-node queue
  // settings whose keys are the names. A queue the top level does not
  // define runs with the defaults.
  auto base = [&](const std::string& queue) {
    for (auto& q : cluster.defaults.queues)
      if (q.name == queue)
        return q;
    queue_config q;
    q.name = queue;
    return q;
  };
  if (auto qs = t.get("queues")) {
    std::vector<queue_config> served;
    std::set<std::string> seen;
    if (auto list = qs->as_array()) {
      for (auto& item : *list) {
        auto queue = item.value<std::string>();
        if (!item.is_string() || !queue || queue->empty())
          throw config_error(where(source, item, p + "queues")
                             + ": expected queue names (strings)");
        check_name(source, item, p + "queues", *queue, "queue");
        if (!seen.insert(*queue).second)
          throw config_error(where(source, item, p + "queues") + ": queue '"
                             + *queue + "' is listed twice");
        served.push_back(base(*queue));
      }
    } else if (auto table = qs->as_table()) {
      for (auto&& [key, settings] : *table) {
        std::string queue{key.str()};
        check_name(source, settings, p + "queues." + queue, queue, "queue");
        if (!settings.is_table())
          throw config_error(where(source, settings, p + "queues." + queue)
                             + ": expected a table ([" + p + "queues." + queue
                             + "])");
        auto qc = base(queue);
        read_queue(source, *settings.as_table(), p + "queues." + queue + ".",
                   qc, false);
        served.push_back(std::move(qc));
      }
    } else {
      throw config_error(where(source, *qs, p + "queues")
                         + ": expected a list of queue names or [" + p
                         + "queues.NAME] tables");
    }
    if (served.empty())
      throw config_error(where(source, *qs, p + "queues")
                         + ": a node serves at least one queue");
    n.config.queues = std::move(served);
  }
  // Cross-key checks point at the node's key when it sets it, else at the
  // top level's.
  validate_at(n.config, source, [&](const std::string& key) {
    std::string own;
    if (key.rfind("worker.", 0) == 0)
      own = p + key.substr(7);
    else if (key.rfind("queues.", 0) == 0)
      own = p + key;
    if (!own.empty())
      if (auto node = find_key(root, own))
        return std::make_pair(own, node);
    if (auto node = find_key(root, key))
      return std::make_pair(key, node);
    // Set by neither (a check across keys the node sets only some of):
    // the node's section.
    return std::make_pair("nodes." + name,
                          static_cast<const toml::node*>(&t));
  });
  return n;
}

toml::table parse_toml(const std::string& toml_text,
                       const std::string& source) {
  try {
    return toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream out;
    out << source << ":" << e.source().begin.line << ":"
        << e.source().begin.column << ": invalid TOML: " << e.description();
    throw config_error(out.str());
  }
}

std::string read_file_bounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw config_error(path + ": cannot open the configuration file");
  // Read at most the limit and one byte more: a device such as /dev/zero,
  // or a file given by mistake, must not fill the memory.
  std::string text(defaults::max_config_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > defaults::max_config_bytes)
    throw config_error(path + ": the configuration file is larger than "
                       + std::to_string(defaults::max_config_bytes / 1024)
                       + " KiB; is it the right file?");
  return text;
}

} // namespace

cluster_config parse_cluster(const std::string& toml_text,
                             const std::string& source) {
  auto root = parse_toml(toml_text, source);
  cluster_config out;
  out.source = source;
  out.defaults = read_top_level(root, source);
  if (auto w = root.get_as<toml::table>("worker"))
    if (auto node = w->get("node"); node && node->is_string())
      out.named_node = *node->value<std::string>();
  if (auto c = sub_table(source, root, "cluster", "")) {
    reject_unknown(source, *c, "cluster.", {"name"});
    read_string(source, *c, "cluster.", "name", out.name);
  }
  if (auto ns = sub_table(source, root, "nodes", "")) {
    for (auto&& [key, value] : *ns)
      out.nodes.push_back(
        read_node(out, root, std::string{key.str()}, value, source));
    std::sort(out.nodes.begin(), out.nodes.end(),
              [](const node_config& a, const node_config& b) {
                return a.name < b.name;
              });
    // A periodic job goes to a queue some node serves, or nothing in the
    // cluster would ever run it.
    for (auto& pc : out.defaults.periodic) {
      bool served = false;
      for (auto& n : out.nodes)
        for (auto& q : n.config.queues)
          served = served || q.name == pc.queue;
      if (served)
        continue;
      std::string key = "periodic." + pc.name + ".queue";
      auto node = find_key(root, key);
      if (!node) {
        key = "periodic." + pc.name;
        node = find_key(root, key);
      }
      std::string names;
      for (auto& n : out.nodes)
        names += (names.empty() ? "" : ", ") + n.name;
      throw config_error(where(source, *node, key) + ": queue '" + pc.queue
                         + "' is served by none of the nodes (" + names
                         + "): its periodic jobs would never run");
    }
  }
  return out;
}

cluster_config load_cluster(const std::string& path) {
  return parse_cluster(read_file_bounded(path), path);
}

runtime_config parse_config(const std::string& toml_text,
                            const std::string& source) {
  return parse_cluster(toml_text, source).defaults;
}

std::string local_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0')
    return defaults::node;
  return buf;
}

runtime_config select_node(const cluster_config& cluster,
                           const std::string& requested) {
  if (cluster.nodes.empty()) {
    auto cfg = cluster.defaults;
    if (!requested.empty())
      cfg.worker.node = requested;
    return cfg;
  }
  auto name = !requested.empty()          ? requested
              : !cluster.named_node.empty() ? cluster.named_node
                                            : local_host_name();
  for (auto& n : cluster.nodes)
    if (n.name == name)
      return n.config;
  std::string names;
  for (auto& n : cluster.nodes)
    names += (names.empty() ? "" : ", ") + n.name;
  std::string how = !requested.empty() ? "--node"
                    : !cluster.named_node.empty()
                      ? "[worker] node"
                      : "the host name (no --node, no [worker] node)";
  throw config_error(cluster.source + ": node '" + name + "' (from " + how
                     + ") is not defined in this cluster file; its nodes are: "
                     + names + " (pass --node NAME)");
}

runtime_config load_config(const std::string& path) {
  return parse_config(read_file_bounded(path), path);
}

runtime_config resolve_config(const config_sources& sources) {
  runtime_config cfg;
  if (!sources.file.empty()) {
    auto cluster = load_cluster(sources.file);
    cfg = sources.select_node || !sources.node.empty()
            ? select_node(cluster, sources.node)
            : cluster.defaults;
  } else {
    cfg.validate();
    if (!sources.node.empty())
      cfg.worker.node = sources.node;
  }
  if (!sources.database_url.empty())
    cfg.database.url = sources.database_url;
  else if (auto env = std::getenv("DATABASE_URL"); env && *env)
    cfg.database.url = env;
  if (cfg.database.url.empty())
    throw config_error("no database URL: pass --database-url, set "
                       "DATABASE_URL, or set url in the [database] section "
                       "of the config file");
  // The default URL came in only now: check it against the others.
  validate_databases(cfg);
  return cfg;
}

} // namespace aw
