// The dashboard's pages: what the page may do (session), the overview of
// a database's queues, the nodes and the periodic schedules.

#include <algorithm>
#include <map>

#include "actor_worker/app/dashboard_assets.hpp"
#include "actor_worker/app/internal/dashboard_impl.hpp"
#include "actor_worker/app/periodic_status.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/storage/admin_nodes.hpp"
#include "actor_worker/storage/admin_queues.hpp"
#include "actor_worker/storage/periodic_schedules.hpp"

namespace aw {

using namespace dashboard_internal;

void dashboard::impl::session(const httplib::Request& req,
                              httplib::Response& res) {
  bool valid = token_matches(policy, req.get_header_value("Authorization"));
  // The names only (the page offers a choice when there are several);
  // never a URL.
  json names = json::array();
  for (auto& db : databases)
    names.push_back(db->name);
  send_json(res, 200,
            json{{"read_only", policy.read_only},
                 {"protect_reads", policy.protect_reads},
                 {"token_configured", !policy.token.empty()},
                 {"actions_enabled", policy.actions_enabled()},
                 {"token_valid", valid},
                 {"charts", dashboard_has_charts()},
                 {"version", node.version},
                 {"worker_id", node.worker_id},
                 {"databases", std::move(names)},
                 {"default_database", defaults::database_name}});
}

queue_snapshot dashboard::impl::queue_sample(database_state& db) {
  auto snapshot = metrics->latest_sample(db.name);
  if (snapshot.taken)
    return snapshot;
  std::lock_guard<std::mutex> guard{db.own_sample_mtx};
  auto now = std::chrono::system_clock::now();
  if (!db.own_sample.taken
      || now - *db.own_sample.taken >= cfg.metrics.queue_stats_interval) {
    db.own_sample.queues = with_db(db, [&](pqxx::connection& c) {
      return storage::dashboard_queue_samples(c, cfg.worker.reclaim_window);
    });
    db.own_sample.taken = now;
  }
  return db.own_sample;
}

json dashboard::impl::throughput_of(const database_state& db) const {
  auto throughput = metrics->throughput_json();
  if (!cfg.sharded())
    return throughput;
  auto& queues = throughput["queues"];
  for (auto it = queues.begin(); it != queues.end();) {
    if (cfg.database_of(it.key()) != db.name)
      it = queues.erase(it);
    else
      ++it;
  }
  return throughput;
}

void dashboard::impl::overview(const httplib::Request& req,
                               httplib::Response& res) {
  auto& db = database_for(req);
  auto snapshot = queue_sample(db);
  auto slots = metrics->slots_by_queue();
  std::map<std::string, json> queues;
  auto row = [](const std::string& name) {
    return json{{"queue", name},          {"available", 0},
                {"scheduled", 0},         {"running", 0},
                {"waiting_external", 0},  {"dead_lettered", 0},
                {"oldest_available_age_seconds", 0},
                {"unserved", 0},
                {"paused", false},        {"paused_at", nullptr},
                {"global_concurrency", nullptr},
                {"rate_limit", nullptr},  {"here", nullptr}};
  };
  for (auto& q : snapshot.queues) {
    auto r = row(q.queue);
    r["available"] = q.available;
    r["scheduled"] = q.scheduled;
    r["running"] = q.running;
    r["waiting_external"] = q.waiting_external;
    r["dead_lettered"] = q.dead_lettered;
    r["unserved"] = q.unserved;
    r["oldest_available_age_seconds"]
      = q.available > 0 ? q.oldest_available_age_seconds : 0.0;
    queues[q.queue] = std::move(r);
  }
  for (auto& q : db.part.queues) {
    if (queues.count(q.name) == 0)
      queues[q.name] = row(q.name);
    auto s = slots.find(q.name);
    queues[q.name]["here"]
      = json{{"concurrency", q.concurrency},
             {"running", s != slots.end() ? s->second.running : 0}};
  }
  // The database's queue controls, read now (the pause must not wait for
  // the next sample).
  auto controls = with_db(db, [&](pqxx::connection& c) {
    pqxx::read_transaction tx{c, "aw_dashboard_queue_controls"};
    return storage::queue_controls(tx);
  });
  for (auto& [name, c] : controls.items()) {
    if (queues.count(name) == 0)
      queues[name] = row(name);
    for (auto& [key, value] : c.items())
      queues[name][key] = value;
  }
  json list = json::array();
  for (auto& [name, q] : queues)
    list.push_back(std::move(q));
  // Null when this node works with no queue or schedule of `db`.
  auto ready = metrics->ready_of(db.name);
  send_json(
    res, 200,
    json{{"database", db.name},
         {"now", unix_seconds(std::chrono::system_clock::now())},
         {"sample",
          {{"taken_at", snapshot.taken
                          ? json(unix_seconds(*snapshot.taken))
                          : json(nullptr)},
           {"interval_seconds",
            fractional_seconds(cfg.metrics.queue_stats_interval)}}},
         {"queues", std::move(list)},
         {"throughput", throughput_of(db)},
         {"ready", ready ? ready->to_json() : json(nullptr)}});
}

void dashboard::impl::nodes(const httplib::Request& req,
                            httplib::Response& res) {
  auto& db = database_for(req);
  auto slots = metrics->slots_by_queue();
  json queues = json::array();
  for (auto& q : db.part.queues) {
    auto s = slots.find(q.name);
    int running = s != slots.end() ? s->second.running : 0;
    queues.push_back({{"queue", q.name},
                      {"concurrency", q.concurrency},
                      {"running", running},
                      {"free", std::max(0, q.concurrency - running)}});
  }
  auto now = std::chrono::system_clock::now();
  // The node's readiness as /readyz answers it (every database's).
  auto ready = metrics->ready();
  json self{{"worker_id", node.worker_id},
            {"node", cfg.worker.node},
            {"version", node.version},
            {"started_at", unix_seconds(node.started)},
            {"uptime_seconds",
             std::chrono::duration<double>(now - node.started).count()},
            {"ready", ready.ready},
            {"reasons", ready.reasons},
            {"queues", std::move(queues)},
            {"kinds", node.kinds},
            {"this_node", true}};
  // Every process of the cluster, as it registered in this database
  // (worker_nodes).
  auto cluster = with_db(db, [&](pqxx::connection& c) {
    return storage::nodes_json(c, cfg.worker.reclaim_window);
  });
  auto processes = json::parse(cluster);
  json leader = nullptr;
  for (auto& p : processes)
    if (p.value("leader", false))
      leader = p["worker_id"];
  send_json(res, 200,
            json{{"database", db.name},
                 {"nodes", json::array({std::move(self)})},
                 {"cluster", std::move(processes)},
                 {"leader", std::move(leader)},
                 {"note", "Every worker process registers at start and "
                          "refreshes its row with each heartbeat round; "
                          "one not seen for the reclaim window is shown "
                          "dead. The leader (elected through a lease row) "
                          "alone runs the cluster's maintenance: rescues, "
                          "cleanup and queue samples."
                          + std::string{cfg.sharded()
                                          ? " Each database has its own "
                                            "rows and its own leader."
                                          : ""}}});
}

void dashboard::impl::schedules(const httplib::Request& req,
                                httplib::Response& res) {
  auto& db = database_for(req);
  // The schedules whose queue lives in `db` beside its rows
  // (periodic_schedules): that database's leader enqueues their ticks.
  auto rows = with_db(db, [&](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    return storage::periodic_rows(tx);
  });
  send_json(res, 200,
            json{{"database", db.name},
                 {"schedules",
                  periodic_status(db.part.periodic, rows,
                                  std::chrono::system_clock::now())},
                 {"note", "Each tick of a [periodic.NAME] schedule is "
                          "enqueued once across the cluster, by the node "
                          "that runs maintenance. Times are UTC; a "
                          "schedule's cron fields are read in its time "
                          "zone."}});
}

} // namespace aw
