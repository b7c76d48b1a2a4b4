#include "actor_worker/app/runtime.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <unistd.h>

#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/exit_reason.hpp>
#include <spdlog/spdlog.h>

#include <pqxx/pqxx>

#include "actor_worker/app/dashboard.hpp"
#include "actor_worker/app/http_endpoint.hpp"
#include "actor_worker/app/idle_poll_gate.hpp"
#include "actor_worker/app/prometheus_observer.hpp"
#include "actor_worker/app/registry_runner.hpp"
#include "actor_worker/actors/hook_dispatcher.hpp"
#include "actor_worker/actors/supervisor.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/transaction_pool.hpp"
#include "actor_worker/app/registry.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw {

std::string runtime::make_worker_id(const std::string& node) {
  std::random_device rd;
  char suffix[9];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return node + ":" + std::to_string(::getpid()) + ":" + suffix;
}

storage::migrate_report migrate(const runtime_config& cfg) {
  if (cfg.database.url.empty())
    throw config_error("database.url is empty: nothing to migrate");
  return storage::migrate(cfg.database.url);
}

std::vector<database_migrate_report>
migrate_all(const runtime_config& cfg,
            const std::function<void(const database_migrate_report&)>& on_done) {
  std::vector<database_migrate_report> reports;
  for (auto& name : cfg.database_names()) {
    auto& db = cfg.database_named(name);
    if (db.url.empty())
      throw config_error("the URL of database '" + name
                         + "' is empty: nothing to migrate");
    reports.push_back({name, storage::migrate(db.url)});
    if (on_done)
      on_done(reports.back());
  }
  return reports;
}

/// The node's supervisors, one per database it works with, and how the
/// node ends: when every one has ended, with the first error any ended
/// with (a fatal error of one, such as an out-of-date schema, stops the
/// others: the node ends loudly, as with one database).
struct runtime::shards {
  struct shard {
    std::string database;
    /// The queues it serves.
    std::vector<std::string> queues;
    caf::actor supervisor;
  };
  std::mutex mtx;
  std::vector<shard> list;
  size_t running = 0;
  caf::error first_error;
  std::promise<caf::error> ended;
};

void configure_actor_system(caf::actor_system_config& sys_cfg,
                            const scheduler_config& sched) {
  auto threads = sched.threads > 0
                   ? static_cast<size_t>(sched.threads)
                   : std::max(1u, std::thread::hardware_concurrency());
  sys_cfg.set("scheduler.max-threads", threads);
  sys_cfg.set("scheduler.policy", sched.policy == "stealing"
                                    ? caf::atom("stealing")
                                    : caf::atom("sharing"));
}

namespace {

/// The databases a node of `cfg` works with, by name: those of its queues
/// and periodic schedules ([database] always, so a node never runs
/// nothing), each with the configuration as it runs against it.
std::vector<std::pair<std::string, runtime_config>>
databases_served(const runtime_config& cfg) {
  std::vector<std::pair<std::string, runtime_config>> parts;
  for (auto& name : cfg.database_names()) {
    auto part = cfg.for_database(name);
    if (name == defaults::database_name || !part.queues.empty()
        || !part.periodic.empty())
      parts.emplace_back(name, std::move(part));
  }
  return parts;
}

/// The metrics of the node's queues and of the databases in `parts`.
std::shared_ptr<prometheus_observer>
observer_of(const runtime_config& cfg, const registry& reg,
            const std::vector<std::pair<std::string, runtime_config>>& parts) {
  std::vector<std::string> queues;
  for (auto& q : cfg.queues)
    queues.push_back(q.name);
  std::vector<std::string> databases;
  for (auto& part : parts)
    databases.push_back(part.first);
  return std::make_shared<prometheus_observer>(
    reg.kinds(), std::move(queues), AW_VERSION, std::move(databases),
    cfg.metrics.max_metric_queues);
}

/// The HTTP endpoint of [http] (listening already), with the dashboard
/// unless [http] dashboard = false; live until `ended` is ready.
std::unique_ptr<http_endpoint>
http_endpoint_of(const runtime_config& cfg, const registry& reg,
                 const std::string& worker_id,
                 std::shared_ptr<prometheus_observer> observer,
                 std::shared_future<caf::error> ended) {
  std::shared_ptr<dashboard> dash;
  if (cfg.http.dashboard)
    dash = std::make_shared<dashboard>(
      cfg,
      dashboard_node{worker_id, AW_VERSION, reg.kinds(),
                     std::chrono::system_clock::now()},
      observer);
  auto ended_view = ended;
  return std::make_unique<http_endpoint>(
    cfg.http,
    [ended_view] {
      return ended_view.wait_for(std::chrono::seconds{0})
             != std::future_status::ready;
    },
    observer, std::move(dash));
}

/// The transactional pools, by database name.
using transaction_pools
  = std::map<std::string, std::shared_ptr<storage::transaction_pool>>;

/// Threads for handlers that may block: started on demand, at most one
/// per concurrency slot, given back when idle. Transactional handlers run
/// there too, their transactions on their job's database's pool.
std::shared_ptr<registry_runner>
handler_runner(const runtime_config& cfg, std::shared_ptr<const registry> reg,
               std::shared_ptr<transaction_pools> pools) {
  size_t threads = 0;
  for (auto& q : cfg.queues)
    threads += static_cast<size_t>(q.concurrency);
  return std::make_shared<registry_runner>(
    reg, threads,
    [reg, pools, routes = cfg](const claimed_job& job,
                               const cancellation_token& cancel) {
      auto pool = pools->find(routes.database_of(job.queue));
      if (pool == pools->end()) // a queue this node claims has its database
        return failure_of(job.id, outcome_kind::retryable_failure,
                          "no transactional pool for the database of queue '"
                            + job.queue + "'");
      return reg->run_transactional(job, cancel, *pool->second);
    },
    // Callback ids registered while a job runs go through the same pool.
    [pools, routes = cfg](const claimed_job& job,
                          std::chrono::milliseconds timeout,
                          const cancellation_token& cancel) {
      auto pool = pools->find(routes.database_of(job.queue));
      if (pool == pools->end())
        throw std::runtime_error("no database connection pool for queue '"
                                 + job.queue + "'");
      return pool->second->register_callback(job.id, job.lease, timeout,
                                             cancel);
    },
    // Kinds that are all transactional part wait for their transaction
    // without a thread.
    [reg, pools, routes = cfg](const claimed_job& job,
                               const cancellation_token& cancel,
                               std::function<void(std::function<void()>)> spawn,
                               std::function<void(job_outcome)> done) {
      auto pool = pools->find(routes.database_of(job.queue));
      return pool != pools->end()
             && reg->start_transactional(job, cancel, *pool->second,
                                         std::move(spawn), std::move(done));
    });
}

} // namespace

runtime::runtime(caf::actor_system& sys, runtime_config cfg,
                 std::shared_ptr<const registry> reg,
                 std::shared_ptr<idle_poll_gate> gate)
  : sys_(sys), reg_(reg), gate_(std::move(gate)),
    conns_(std::make_unique<connections>()),
    shards_(std::make_shared<shards>()) {
  cfg.validate();
  if (cfg.database.url.empty())
    throw config_error("database.url is empty: set it, or resolve the "
                       "configuration with aw::resolve_config (which reads "
                       "DATABASE_URL)");
  cfg_ = cfg;
  worker_id_ = make_worker_id(cfg.worker.node);
  ended_ = shards_->ended.get_future().share();
  auto parts = databases_served(cfg);
  if (!cfg.http.listen.empty()) {
    observer_ = observer_of(cfg, *reg, parts);
    // Before any actor starts: a port in use fails the start cleanly.
    http_ = http_endpoint_of(cfg, *reg, worker_id_, observer_, ended_);
  }
  // Hooks may block: the dispatcher gets a thread of its own.
  auto hooks = sys.spawn<caf::detached>(hook_dispatcher_behavior, reg,
                                        std::shared_ptr<observer>{observer_});
  hooks_ = std::make_unique<caf::actor>(caf::actor_cast<caf::actor>(hooks));
  auto host = local_host_name();
  auto& all = *shards_;
  {
    std::lock_guard<std::mutex> guard{all.mtx};
    all.running = parts.size();
  }
  // One supervisor per database, and a transactional pool per database
  // with the same connection options as its storage actors.
  std::vector<supervisor_config> configs;
  auto pools = std::make_shared<transaction_pools>();
  for (auto& [name, part] : parts) {
    supervisor_config sc;
    sc.config = std::move(part);
    sc.database = name;
    sc.worker_id = worker_id_;
    sc.host = host;
    sc.version = AW_VERSION;
    sc.handlers = reg;
    sc.hooks = hooks;
    if (gate_)
      sc.shared_gate = caf::actor_cast<poll_gate_actor>(gate_->actor());
    if (observer_)
      sc.watcher = observer_->for_database(name);
    sc.sample_interval = sc.config.metrics.queue_stats_interval;
    auto& db = sc.config.database;
    std::map<std::string, int> groups, concurrency;
    for (auto& q : sc.config.queues) {
      groups[q.name] = q.transactional_group;
      concurrency[q.name] = q.concurrency;
    }
    (*pools)[name] = std::make_shared<storage::transaction_pool>(
      store_options(sc), reg->observed_kinds(), follow_ups_of(sc),
      db.transactional_pool_size, db.transaction_timeout, std::move(groups),
      std::move(concurrency));
    configs.push_back(std::move(sc));
  }
  runner_ = handler_runner(cfg, reg, pools);
  // Not under the lock: a supervisor that ended already runs its functor
  // (which takes the lock) inside attach_functor.
  for (auto& sc : configs) {
    shards::shard sh;
    sh.database = sc.database;
    for (auto& q : sc.config.queues)
      sh.queues.push_back(q.name);
    sc.runner = runner_;
    auto sup = sys.spawn(supervisor_behavior, std::move(sc));
    sh.supervisor = caf::actor_cast<caf::actor>(sup);
    {
      std::lock_guard<std::mutex> guard{all.mtx};
      all.list.push_back(std::move(sh));
    }
    // Shared: the last functor may still hold the lock after the runtime
    // that waited on `ended` is gone.
    auto state = shards_;
    sup->attach_functor([state](const caf::error& reason) {
      std::lock_guard<std::mutex> guard{state->mtx};
      bool clean = reason == caf::exit_reason::user_shutdown
                   || reason == caf::exit_reason::normal;
      if (!clean && !state->first_error) {
        state->first_error = reason;
        // One database's fatal error ends the node: stop the others.
        for (auto& other : state->list)
          caf::anon_send(caf::actor_cast<supervisor_actor>(other.supervisor),
                         stop_atom::value);
      }
      if (--state->running == 0)
        state->ended.set_value(state->first_error);
    });
  }
}

runtime::~runtime() {
  stop();
}

stop_report runtime::stop(std::chrono::milliseconds handler_wait) {
  if (stopped_)
    return stopped_report_;
  stopped_ = true;
  if (ended_.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
    // Every database's supervisor drains at once (in parallel).
    caf::scoped_actor self{sys_};
    std::vector<supervisor_actor> sups;
    {
      std::lock_guard<std::mutex> guard{shards_->mtx};
      for (auto& sh : shards_->list)
        sups.push_back(caf::actor_cast<supervisor_actor>(sh.supervisor));
    }
    // Every request goes out before the first answer is awaited.
    using handle = decltype(self->request(sups.front(), caf::infinite,
                                          stop_atom::value));
    std::vector<handle> pending;
    for (auto& sup : sups)
      pending.push_back(self->request(sup, caf::infinite, stop_atom::value));
    for (auto& h : pending)
      h.receive(
        [&](int64_t released) { stopped_report_.released += released; },
        [&](caf::error& err) {
          // It ended while we asked (a fatal error): nothing to drain.
          spdlog::debug("stop: {}", render(err));
        });
  }
  ended_.wait();
  // Hooks are best effort: events still queued are dropped.
  caf::anon_send_exit(*hooks_, caf::exit_reason::user_shutdown);
  // Cut handlers off the actor system, then give the ones that ignored
  // their cancellation a last chance to return.
  stopped_report_.abandoned = runner_->stop(handler_wait);
  // Probes answered "draining" until here.
  http_.reset();
  if (stopped_report_.abandoned > 0)
    spdlog::warn("stopped: {} handler(s) still running after the drain and "
                 "{} more; they finish on their own, their results dropped",
                 stopped_report_.abandoned, format_duration(handler_wait));
  return stopped_report_;
}

caf::error runtime::wait() {
  return ended_.get();
}

std::optional<caf::error>
runtime::wait_for(std::chrono::milliseconds timeout) {
  if (ended_.wait_for(timeout) != std::future_status::ready)
    return std::nullopt;
  return ended_.get();
}

/// Resolutions and enqueues reuse one connection per database (opening
/// one per call would cost more than the statement); they take turns on
/// it. After a broken connection the next call reconnects.
struct runtime::connections {
  std::mutex mtx;
  std::map<std::string, std::unique_ptr<pqxx::connection>> by_database;
};

template <class F>
auto runtime::on_database(const std::string& name, F fn) {
  std::lock_guard<std::mutex> guard{conns_->mtx};
  auto& conn = conns_->by_database[name];
  if (!conn)
    conn = std::make_unique<pqxx::connection>(cfg_.database_named(name).url);
  try {
    return fn(*conn);
  } catch (const pqxx::broken_connection&) {
    conn.reset();
    throw;
  } catch (const pqxx::in_doubt_error&) {
    conn.reset();
    throw;
  }
}

callback_outcome runtime::resolve(const std::string& callback_id,
                                  storage::callback_action action,
                                  const nlohmann::json& payload,
                                  const std::string& error) {
  // Callback ids are unguessable and unique across databases: look in
  // each in turn (the default first) until one knows the id.
  auto names = cfg_.database_names();
  for (size_t i = 0; i < names.size(); ++i) {
    try {
      return on_database(names[i], [&](pqxx::connection& conn) {
        return resolve_on(conn, names[i], callback_id, action, payload, error);
      });
    } catch (const storage::callback_error& e) {
      if (e.code() != ec::callback_not_found || i + 1 == names.size())
        throw;
    }
  }
  throw std::logic_error("no database"); // database_names() is never empty
}

const database_config& runtime::database_for(const std::string& queue) const {
  return cfg_.database_named(cfg_.database_of(queue));
}

int64_t runtime::enqueue(const std::string& kind, const nlohmann::json& args,
                         const insert_options& opts) {
  check_enqueue(kind, args, opts);
  return on_database(cfg_.database_of(opts.queue),
                     [&](pqxx::connection& conn) {
                       pqxx::work tx{conn, "aw_enqueue"};
                       auto id = aw::enqueue(tx, kind, args, opts);
                       tx.commit();
                       return id;
                     });
}

std::vector<int64_t>
runtime::enqueue_many(const std::vector<enqueue_request>& jobs) {
  if (jobs.empty())
    return {};
  auto& home = cfg_.database_of(jobs.front().options.queue);
  for (auto& job : jobs)
    if (cfg_.database_of(job.options.queue) != home)
      throw std::invalid_argument(
        "enqueue_many: queue '" + jobs.front().options.queue
        + "' lives in database '" + home + "' and queue '" + job.options.queue
        + "' in database '" + cfg_.database_of(job.options.queue)
        + "': one transaction cannot span two databases; enqueue them "
          "separately");
  return on_database(home, [&](pqxx::connection& conn) {
    pqxx::work tx{conn, "aw_enqueue"};
    auto ids = aw::enqueue_many(tx, jobs);
    tx.commit();
    return ids;
  });
}

callback_outcome runtime::resolve_on(pqxx::connection_base& conn,
                                     const std::string& database,
                                     const std::string& callback_id,
                                     storage::callback_action action,
                                     const nlohmann::json& payload,
                                     const std::string& error) {
  pqxx::work tx{conn, "aw_callback"};
  auto resolved = storage::resolve_callback(tx, callback_id, action, payload,
                                            error);
  auto& e = resolved.event;
  if (resolved.has_event) {
    try {
      auto requests = reg_->follow_ups(make_event(e));
      for (auto& r : requests)
        cfg_.require_database(r.options.queue, database, "it");
      if (!requests.empty())
        aw::enqueue_many(tx, requests);
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const std::exception& ex) {
      throw storage::callback_error(
        ec::follow_up_failed,
        "callback " + callback_id + ": a follow-up of job kind '" + e.kind
          + "' failed, so the resolution was rolled back: " + ex.what());
    } catch (...) {
      throw storage::callback_error(
        ec::follow_up_failed,
        "callback " + callback_id + ": a follow-up of job kind '" + e.kind
          + "' threw a non-standard exception, so the resolution was rolled "
            "back");
    }
  }
  tx.commit();
  callback_outcome out{action, nlohmann::json::parse(resolved.row_json),
                       resolved.kept};
  if (resolved.has_event)
    caf::anon_send(caf::actor_cast<hook_dispatcher_actor>(*hooks_),
                   std::move(e));
  return out;
}

callback_outcome runtime::complete_external(const std::string& callback_id,
                                            const nlohmann::json& payload) {
  return resolve(callback_id, storage::callback_action::complete, payload, {});
}

callback_outcome runtime::fail_external(const std::string& callback_id,
                                        const std::string& error) {
  return resolve(callback_id, storage::callback_action::fail, nullptr, error);
}

callback_outcome runtime::retry_external(const std::string& callback_id,
                                         const nlohmann::json& payload) {
  return resolve(callback_id, storage::callback_action::retry, payload, {});
}

callback_outcome runtime::resume_external(const std::string& callback_id,
                                          const nlohmann::json& payload) {
  return resolve(callback_id, storage::callback_action::resume, payload, {});
}

callback_outcome runtime::resolve_callback(const std::string& callback_id,
                                           const nlohmann::json& payload,
                                           const std::string& default_action) {
  auto action = storage::parse_callback_action(default_action);
  std::string error;
  if (action == storage::callback_action::fail && payload.is_object())
    error = payload.value("error", std::string{});
  return resolve(callback_id, action, payload, error);
}

void runtime::wake(const std::string& queue) {
  std::lock_guard<std::mutex> guard{shards_->mtx};
  for (auto& sh : shards_->list)
    if (queue.empty()
        || std::find(sh.queues.begin(), sh.queues.end(), queue)
             != sh.queues.end())
      caf::anon_send(caf::actor_cast<supervisor_actor>(sh.supervisor),
                     wake_atom::value, queue);
}

} // namespace aw
