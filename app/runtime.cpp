#include "actor_worker/app/runtime.hpp"

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

runtime::runtime(caf::actor_system& sys, runtime_config cfg,
                 std::shared_ptr<const registry> reg,
                 std::shared_ptr<idle_poll_gate> gate)
  : sys_(sys), reg_(reg), gate_(std::move(gate)),
    callback_conn_(std::make_unique<callback_connection>()) {
  cfg.validate();
  if (cfg.database.url.empty())
    throw config_error("database.url is empty: set it, or resolve the "
                       "configuration with aw::resolve_config (which reads "
                       "DATABASE_URL)");
  cfg_ = cfg;
  worker_id_ = make_worker_id(cfg.worker.node);
  auto ended = std::make_shared<std::promise<caf::error>>();
  ended_ = ended->get_future().share();
  if (!cfg.http.listen.empty()) {
    std::vector<std::string> queues;
    for (auto& q : cfg.queues)
      queues.push_back(q.name);
    observer_ = std::make_shared<prometheus_observer>(
      reg->kinds(), std::move(queues), AW_VERSION);
    std::shared_ptr<dashboard> dash;
    if (cfg.http.dashboard)
      dash = std::make_shared<dashboard>(
        cfg,
        dashboard_node{worker_id_, AW_VERSION, reg->kinds(),
                       std::chrono::system_clock::now()},
        observer_);
    // Before any actor starts: a port in use fails the start cleanly.
    auto ended_view = ended_;
    http_ = std::make_unique<http_endpoint>(
      cfg.http,
      [ended_view] {
        return ended_view.wait_for(std::chrono::seconds{0})
               != std::future_status::ready;
      },
      observer_, std::move(dash));
  }
  size_t threads = 0;
  for (auto& q : cfg.queues)
    threads += static_cast<size_t>(q.concurrency);
  // Threads for handlers that may block: started on demand, at most one
  // per concurrency slot, given back when idle.
  runner_ = std::make_shared<registry_runner>(reg, threads);
  // Hooks may block: the dispatcher gets a thread of its own.
  auto hooks = sys.spawn<caf::detached>(hook_dispatcher_behavior, reg,
                                        std::shared_ptr<observer>{observer_});
  hooks_ = std::make_unique<caf::actor>(caf::actor_cast<caf::actor>(hooks));
  supervisor_config sc;
  sc.config = std::move(cfg);
  sc.worker_id = worker_id_;
  sc.host = local_host_name();
  sc.version = AW_VERSION;
  sc.runner = runner_;
  sc.handlers = reg;
  sc.hooks = hooks;
  if (gate_)
    sc.shared_gate = caf::actor_cast<poll_gate_actor>(gate_->actor());
  sc.watcher = observer_;
  sc.sample_interval = sc.config.metrics.queue_stats_interval;
  auto sup = sys.spawn(supervisor_behavior, std::move(sc));
  sup->attach_functor([ended](const caf::error& reason) {
    if (reason == caf::exit_reason::user_shutdown
        || reason == caf::exit_reason::normal)
      ended->set_value(caf::error{});
    else
      ended->set_value(reason);
  });
  supervisor_ = std::make_unique<caf::actor>(caf::actor_cast<caf::actor>(sup));
}

runtime::~runtime() {
  stop();
}

stop_report runtime::stop(std::chrono::milliseconds handler_wait) {
  if (stopped_)
    return stopped_report_;
  stopped_ = true;
  if (ended_.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
    caf::scoped_actor self{sys_};
    auto sup = caf::actor_cast<supervisor_actor>(*supervisor_);
    self->request(sup, caf::infinite, stop_atom::value)
      .receive([&](int64_t released) { stopped_report_.released = released; },
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

/// Resolutions reuse one connection (opening one per call would cost more
/// than the resolution); they take turns on it. After a broken connection
/// the next call reconnects.
struct runtime::callback_connection {
  std::mutex mtx;
  std::unique_ptr<pqxx::connection> conn;
};

callback_outcome runtime::resolve(const std::string& callback_id,
                                  storage::callback_action action,
                                  const nlohmann::json& payload,
                                  const std::string& error) {
  std::lock_guard<std::mutex> guard{callback_conn_->mtx};
  auto& conn = callback_conn_->conn;
  if (!conn)
    conn = std::make_unique<pqxx::connection>(cfg_.database.url);
  try {
    return resolve_on(*conn, callback_id, action, payload, error);
  } catch (const pqxx::broken_connection&) {
    conn.reset();
    throw;
  } catch (const pqxx::in_doubt_error&) {
    conn.reset();
    throw;
  }
}

callback_outcome runtime::resolve_on(pqxx::connection_base& conn,
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
      if (!requests.empty())
        enqueue_many(tx, requests);
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
  callback_outcome out{action, nlohmann::json::parse(resolved.row_json)};
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
  caf::anon_send(caf::actor_cast<supervisor_actor>(*supervisor_),
                 wake_atom::value, queue);
}

} // namespace aw
