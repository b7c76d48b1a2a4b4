// runtime_config's checks across keys, and where each queue's database is.

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "actor_worker/config/internal/load_parts.hpp"

namespace aw {

namespace config_detail {

void validate_databases(const runtime_config& cfg) {
  std::set<std::string> names{defaults::database_name};
  std::map<std::string, std::string> urls;
  if (!cfg.database.url.empty())
    urls[cfg.database.url] = "database.url";
  for (auto& d : cfg.databases) {
    const std::string p = "databases." + d.name;
    if (d.name.empty() || d.name == defaults::database_name)
      throw config_error(p + " is not a valid name: the default database is "
                             "the [database] section");
    if (!names.insert(d.name).second)
      throw config_error(p + " is configured twice");
    if (d.settings.pool_size < 1)
      throw config_error(p + ".pool_size must be at least 1");
    if (d.settings.url.empty())
      throw config_error(p + ".url must not be empty");
    auto [at, fresh] = urls.emplace(d.settings.url, p + ".url");
    if (!fresh)
      throw config_error(p + ".url is the same as " + at->second
                         + ": each database must be named once");
  }
  for (auto& [queue, db] : cfg.queue_databases)
    if (names.count(db) == 0) {
      std::string known;
      for (auto& n : names)
        known += (known.empty() ? "" : ", ") + n;
      throw config_error("queues." + queue + ".database names '" + db
                         + "', which is not a database of this file (its "
                           "databases: " + known + ")");
    }
}

} // namespace config_detail

void runtime_config::validate() {
  if (database.pool_size < 1)
    throw config_error("database.pool_size must be at least 1");
  if (worker.node.empty())
    throw config_error("worker.node must not be empty");
  if (worker.poll_interval.count() <= 0)
    throw config_error("worker.poll_interval must be greater than 0");
  if (worker.max_retries < 0)
    throw config_error("worker.max_retries must not be negative");
  if (worker.shutdown_drain.count() < 0)
    throw config_error("worker.shutdown_drain must not be negative");
  if (worker.maintenance_interval.count() <= 0)
    throw config_error("worker.maintenance_interval must be greater than 0");
  if (worker.heartbeat_interval.count() <= 0)
    throw config_error("worker.heartbeat_interval must be greater than 0");
  if (worker.reclaim_window
      < worker.heartbeat_interval * defaults::min_heartbeats_per_window)
    throw config_error(
      "worker.reclaim_window (" + format_duration(worker.reclaim_window)
      + ") must be at least "
      + std::to_string(defaults::min_heartbeats_per_window)
      + " x worker.heartbeat_interval ("
      + format_duration(worker.heartbeat_interval)
      + "), so a lease survives a slow heartbeat and the watchdog can "
        "abandon a job before another worker reclaims it");
  if (worker.idle_poll_permits < 0)
    throw config_error("worker.idle_poll_permits must not be negative");
  if (worker.local_queue_size < 1)
    throw config_error("worker.local_queue_size must be at least 1");
  if (worker.local_queue_bytes < 1)
    throw config_error("worker.local_queue_bytes must be at least 1");
  if (scheduler.threads < 0)
    throw config_error("scheduler.threads must not be negative");
  if (scheduler.policy != "sharing" && scheduler.policy != "stealing")
    throw config_error("scheduler.policy must be \"sharing\" or "
                       "\"stealing\", not \"" + scheduler.policy + "\"");
  if (queues.empty())
    queues.push_back(queue_config{});
  std::set<std::string> seen;
  for (auto& q : queues) {
    if (q.name.empty())
      throw config_error("queue names must not be empty");
    if (!seen.insert(q.name).second)
      throw config_error("queue '" + q.name + "' is configured twice");
    if (q.concurrency < 1)
      throw config_error("queues." + q.name
                         + ".concurrency must be at least 1");
    if (q.deadline.count() < 0)
      throw config_error("queues." + q.name + ".deadline must not be negative");
    if (q.local_queue_size < 0)
      throw config_error("queues." + q.name
                         + ".local_queue_size must not be negative");
    if (q.local_queue_bytes < 0)
      throw config_error("queues." + q.name
                         + ".local_queue_bytes must not be negative");
    if (q.global_concurrency < 0)
      throw config_error("queues." + q.name
                         + ".global_concurrency must not be negative");
    if (q.rate_limit < 0
        || (q.rate_limit == 0) != (q.rate_period.count() == 0)
        || (q.rate_limit > 0 && q.rate_period != std::chrono::seconds{1}
            && q.rate_period != std::chrono::minutes{1}))
      throw config_error("queues." + q.name
                         + ".rate_limit must be N per second or per minute");
  }
  config_detail::validate_http_dashboard(http);
  config_detail::validate_databases(*this);
}

const std::string& runtime_config::database_of(const std::string& queue) const {
  static const std::string default_name = defaults::database_name;
  auto i = queue_databases.find(queue);
  return i == queue_databases.end() ? default_name : i->second;
}

const database_config&
runtime_config::database_named(const std::string& name) const {
  if (name.empty() || name == defaults::database_name)
    return database;
  for (auto& d : databases)
    if (d.name == name)
      return d.settings;
  std::string names;
  for (auto& n : database_names())
    names += (names.empty() ? "" : ", ") + n;
  throw config_error("no database named '" + name + "' (the configuration's "
                     "databases: " + names + ")");
}

std::vector<std::string> runtime_config::database_names() const {
  std::vector<std::string> names{defaults::database_name};
  for (auto& d : databases)
    names.push_back(d.name);
  return names;
}

runtime_config runtime_config::for_database(const std::string& name) const {
  runtime_config shard = *this;
  shard.database = database_named(name);
  shard.databases.clear();
  auto here = [&](const std::string& queue) {
    auto& db = database_of(queue);
    return db == name || (name.empty() && db == defaults::database_name);
  };
  shard.queues.clear();
  for (auto& q : queues)
    if (here(q.name))
      shard.queues.push_back(q);
  shard.periodic.clear();
  for (auto& p : periodic)
    if (here(p.queue))
      shard.periodic.push_back(p);
  return shard;
}

void runtime_config::require_database(const std::string& queue,
                                      const std::string& database,
                                      const std::string& what) const {
  auto& home = database_of(queue);
  if (home == database
      || (database.empty() && home == defaults::database_name))
    return;
  throw std::invalid_argument(
    what + " goes to queue '" + queue + "', which lives in database '" + home
    + "'; it is enqueued in the transaction of its trigger, in database '"
    + database + "', and a transaction cannot span two databases (send it "
      "to a queue of '" + database + "', or enqueue it from the handler)");
}

runtime_config runtime_config::routed(const std::string& name,
                                      const std::string& queue) const {
  std::string target = name;
  if (!queue.empty()) {
    auto& home = database_of(queue);
    if (!target.empty() && target != home)
      throw config_error("queue '" + queue + "' lives in database '" + home
                         + "', not '" + target + "' (--database " + target
                         + "); drop --database or name '" + home + "'");
    target = home;
  }
  runtime_config out = *this;
  out.database = database_named(target);
  return out;
}

} // namespace aw
