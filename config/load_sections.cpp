// The sections of a file's top level: [database] and [databases.NAME],
// [worker], [scheduler], [queues.NAME], [http], [metrics] and [log]
// ([kinds] and [periodic] have files of their own; [cluster] and [nodes]
// are config/load.cpp's).

#include <set>
#include <string>
#include <utility>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw::config_detail {

namespace {

/// [database] or [databases.NAME] (`p`: "database." or "databases.NAME.").
void read_database(const std::string& source, const toml::table& db,
                   const std::string& p, database_config& out) {
  reject_unknown(source, db, p,
                 {"url", "pool_size", "pooler", "listen_url",
                  "transactional_pool_size", "transaction_timeout"});
  read_string(source, db, p, "url", out.url);
  read_string(source, db, p, "listen_url", out.listen_url);
  read_string(source, db, p, "pooler", out.pooler);
  if (out.pooler != "none" && out.pooler != "transaction")
    throw config_error(where(source, *db.get("pooler"), p + "pooler")
                       + ": expected \"none\" or \"transaction\"");
  read_int(source, db, p, "pool_size", out.pool_size, 1, 64);
  read_int(source, db, p, "transactional_pool_size",
           out.transactional_pool_size, 1, 1000);
  read_duration(source, db, p, "transaction_timeout", out.transaction_timeout);
  if (out.transaction_timeout.count() <= 0)
    throw config_error(where(source, *db.get("transaction_timeout"),
                             p + "transaction_timeout")
                       + ": must be greater than 0");
}

/// [database] and the further [databases.NAME].
void read_databases(const std::string& source, const toml::table& root,
                    runtime_config& cfg) {
  if (auto db = sub_table(source, root, "database", ""))
    read_database(source, *db, "database.", cfg.database);
  auto dbs = sub_table(source, root, "databases", "");
  if (!dbs)
    return;
  for (auto&& [key, value] : *dbs) {
    std::string name{key.str()};
    std::string p = "databases." + name;
    if (!value.is_table())
      throw config_error(where(source, value, p)
                         + ": expected a table ([" + p + "])");
    if (name == defaults::database_name || name.empty())
      throw config_error(where(source, value, p)
                         + ": the default database is the [database] "
                           "section; name this one differently");
    named_database d;
    d.name = name;
    read_database(source, *value.as_table(), p + ".", d.settings);
    if (d.settings.url.empty())
      throw config_error(where(source, value, p)
                         + ": url is required (a further database has no "
                           "DATABASE_URL fallback)");
    cfg.databases.push_back(std::move(d));
  }
}

/// [scheduler].
void read_scheduler(const std::string& source, const toml::table& sc,
                    scheduler_config& out) {
  const std::string p = "scheduler.";
  reject_unknown(source, sc, p, {"threads", "policy"});
  read_int(source, sc, p, "threads", out.threads, 0, 1024);
  read_string(source, sc, p, "policy", out.policy);
  if (out.policy != "sharing" && out.policy != "stealing")
    throw config_error(where(source, *sc.get("policy"), p + "policy")
                       + ": expected \"sharing\" or \"stealing\", got \""
                       + out.policy + "\"");
}

/// The top level's [queues.NAME] tables, and the database each names.
void read_queues(const std::string& source, const toml::table& qs,
                 runtime_config& cfg) {
  for (auto&& [key, value] : qs) {
    std::string name{key.str()};
    std::string p = "queues." + name + ".";
    if (!value.is_table())
      throw config_error(where(source, value, "queues." + name)
                         + ": expected a table ([queues." + name + "])");
    check_name(source, value, "queues." + name, name, "queue");
    queue_config qc;
    qc.name = name;
    if (auto db = value.as_table()->get("database")) {
      auto text = db->value<std::string>();
      if (!db->is_string() || !text || text->empty())
        throw config_error(where(source, *db, p + "database")
                           + ": expected the name of a [databases.NAME] "
                             "section (or \"default\")");
      if (*text != defaults::database_name)
        cfg.queue_databases[name] = *text;
    }
    read_queue(source, *value.as_table(), p, qc, true);
    cfg.queues.push_back(std::move(qc));
  }
}

/// [http].
void read_http(const std::string& source, const toml::table& h,
               http_config& out) {
  reject_unknown(source, h, "http.",
                 {"listen", "dashboard", "token", "token_env",
                  "allowed_hosts", "read_only", "protect_reads"});
  read_string(source, h, "http.", "listen", out.listen);
  read_bool(source, h, "http.", "dashboard", out.dashboard);
  read_string(source, h, "http.", "token", out.token);
  read_string(source, h, "http.", "token_env", out.token_env);
  read_string_array(source, h, "http.", "allowed_hosts", out.allowed_hosts);
  read_bool(source, h, "http.", "read_only", out.read_only);
  read_bool(source, h, "http.", "protect_reads", out.protect_reads);
  if (!out.listen.empty()) {
    try {
      out.port();
    } catch (const config_error& e) {
      throw config_error(where(source, at(h, "listen"), "http.listen") + ": "
                         + e.what());
    }
  }
}

/// [metrics].
void read_metrics(const std::string& source, const toml::table& m,
                  metrics_config& out) {
  reject_unknown(source, m, "metrics.",
                 {"queue_stats_interval", "max_metric_queues"});
  read_duration(source, m, "metrics.", "queue_stats_interval",
                out.queue_stats_interval);
  read_int(source, m, "metrics.", "max_metric_queues", out.max_metric_queues,
           0, 100000);
}

/// [log].
void read_log(const std::string& source, const toml::table& l,
              log_config& out) {
  reject_unknown(source, l, "log.", {"format"});
  read_string(source, l, "log.", "format", out.format);
  if (out.format != "text" && out.format != "json")
    throw config_error(where(source, at(l, "format"), "log.format")
                       + ": expected \"text\" or \"json\", got \""
                       + out.format + "\"");
}

} // namespace

const std::set<std::string>& worker_keys() {
  static const std::set<std::string> keys{
    "node", "poll_interval", "max_retries", "shutdown_drain",
    "completed_retention", "dead_letter_retention", "maintenance_interval",
    "heartbeat_interval", "reclaim_window", "idle_poll_permits",
    "local_queue_size", "local_queue_bytes"};
  return keys;
}

void read_worker(const std::string& source, const toml::table& w,
                 const std::string& p, worker_config& out_cfg) {
  auto& cfg_worker = out_cfg;
  read_string(source, w, p, "node", cfg_worker.node);
  read_duration(source, w, p, "poll_interval", cfg_worker.poll_interval);
  read_int(source, w, p, "max_retries", cfg_worker.max_retries, 0, 1000000);
  read_duration(source, w, p, "shutdown_drain", cfg_worker.shutdown_drain);
  read_duration(source, w, p, "completed_retention",
                cfg_worker.completed_retention);
  read_duration(source, w, p, "dead_letter_retention",
                cfg_worker.dead_letter_retention);
  read_duration(source, w, p, "maintenance_interval",
                cfg_worker.maintenance_interval);
  read_duration(source, w, p, "heartbeat_interval",
                cfg_worker.heartbeat_interval);
  read_duration(source, w, p, "reclaim_window", cfg_worker.reclaim_window);
  read_int(source, w, p, "idle_poll_permits", cfg_worker.idle_poll_permits,
           0, 100000);
  read_int(source, w, p, "local_queue_size", cfg_worker.local_queue_size,
           1, 100000);
  read_size(source, w, p, "local_queue_bytes",
            cfg_worker.local_queue_bytes, 1);
  if (cfg_worker.node.empty())
    throw config_error(where(source, at(w, "node"), p + "node")
                       + ": must not be empty");
  if (cfg_worker.poll_interval.count() <= 0)
    throw config_error(where(source, at(w, "poll_interval"),
                             p + "poll_interval")
                       + ": must be greater than 0");
}

void read_queue(const std::string& source, const toml::table& q,
                const std::string& p, queue_config& qc, bool cluster_wide) {
  for (const char* key : {"global_concurrency", "rate_limit", "database"})
    if (!cluster_wide && q.contains(key))
      throw config_error(where(source, *q.get(key), p + key)
                         + ": a cluster-wide setting; set it in the top "
                           "level's [queues." + qc.name + "], not per node");
  if (cluster_wide)
    reject_unknown(source, q, p,
                   {"concurrency", "deadline", "local_queue_size",
                    "local_queue_bytes", "transactional_group",
                    "global_concurrency", "rate_limit", "database"});
  else
    reject_unknown(source, q, p,
                   {"concurrency", "deadline", "local_queue_size",
                    "local_queue_bytes", "transactional_group"});
  read_int(source, q, p, "concurrency", qc.concurrency, 1, 100000);
  read_duration(source, q, p, "deadline", qc.deadline);
  read_int(source, q, p, "local_queue_size", qc.local_queue_size, 1, 100000);
  read_size(source, q, p, "local_queue_bytes", qc.local_queue_bytes, 1);
  read_int(source, q, p, "transactional_group", qc.transactional_group, 1,
           defaults::max_transactional_group);
  read_int(source, q, p, "global_concurrency", qc.global_concurrency, 1,
           defaults::max_global_concurrency);
  if (auto node = q.get("rate_limit")) {
    auto text = node->value<std::string>();
    if (!node->is_string() || !text)
      throw config_error(where(source, *node, p + "rate_limit")
                         + ": expected a string such as \"10/s\" or "
                           "\"600/m\"");
    try {
      auto [n, period] = parse_rate_limit(*text);
      qc.rate_limit = n;
      qc.rate_period = period;
    } catch (const std::invalid_argument& e) {
      throw config_error(where(source, *node, p + "rate_limit") + ": "
                         + e.what());
    }
  }
}

runtime_config read_top_level(const toml::table& root,
                              const std::string& source) {
  runtime_config cfg;
  reject_unknown(source, root, "",
                 {"database", "databases", "worker", "scheduler", "queues",
                  "kinds", "periodic", "http", "metrics", "log", "cluster",
                  "nodes"});
  read_databases(source, root, cfg);
  if (auto w = sub_table(source, root, "worker", "")) {
    reject_unknown(source, *w, "worker.", worker_keys());
    read_worker(source, *w, "worker.", cfg.worker);
  }
  if (auto sc = sub_table(source, root, "scheduler", ""))
    read_scheduler(source, *sc, cfg.scheduler);
  if (auto qs = sub_table(source, root, "queues", ""))
    read_queues(source, *qs, cfg);
  if (auto ks = sub_table(source, root, "kinds", ""))
    read_kinds(source, *ks, cfg);
  if (auto ps = sub_table(source, root, "periodic", ""))
    read_periodic(source, *ps, cfg);
  if (auto h = sub_table(source, root, "http", ""))
    read_http(source, *h, cfg.http);
  if (auto m = sub_table(source, root, "metrics", ""))
    read_metrics(source, *m, cfg.metrics);
  if (auto l = sub_table(source, root, "log", ""))
    read_log(source, *l, cfg.log);
  // validate()'s messages start with the key they are about: point at its
  // line when the file sets it.
  validate_at(cfg, source, [&](const std::string& key) {
    return std::make_pair(key, find_key(root, key));
  });
  return cfg;
}

} // namespace aw::config_detail
