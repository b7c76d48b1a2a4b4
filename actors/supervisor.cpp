#include "actor_worker/actors/supervisor.hpp"

#include <algorithm>

#include <caf/actor_cast.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/actors/lease_keeper.hpp"
#include "actor_worker/actors/listener.hpp"
#include "actor_worker/actors/poll_gate.hpp"
#include "actor_worker/actors/maintenance.hpp"
#include "actor_worker/actors/poller.hpp"
#include "actor_worker/actors/storage.hpp"
#include "actor_worker/storage/pg_backend.hpp"
#include "actor_worker/messages/job_handlers.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw {

namespace {

/// Appended to log lines: names the database when the node has several.
std::string of_database(const supervisor_config& cfg) {
  return cfg.config.queue_databases.empty()
           ? std::string{}
           : " (database '" + cfg.database + "')";
}

void spawn_poller(supervisor_pointer self, const queue_config& q) {
  auto& st = self->state;
  poller_config pc;
  pc.queue = q.name;
  pc.concurrency = q.concurrency;
  pc.poll_interval = st.cfg.config.worker.poll_interval;
  pc.shutdown_drain = st.cfg.config.worker.shutdown_drain;
  pc.local_queue_size = q.local_queue_size > 0
                          ? q.local_queue_size
                          : st.cfg.config.worker.local_queue_size;
  pc.local_queue_bytes = q.local_queue_bytes > 0
                           ? q.local_queue_bytes
                           : st.cfg.config.worker.local_queue_bytes;
  pc.claimer = st.claimer;
  pc.completers = st.completers;
  pc.runner = st.cfg.runner;
  pc.hooks = st.cfg.hooks;
  pc.default_deadline = q.deadline;
  pc.abandon_grace = st.cfg.config.worker.heartbeat_interval;
  pc.gate = st.gate;
  pc.watcher = st.cfg.watcher;
  auto p = self->spawn<caf::linked>(poller_behavior, std::move(pc));
  st.pollers[q.name] = p;
}

void spawn_listener(supervisor_pointer self) {
  auto& st = self->state;
  auto url = st.cfg.config.database.notification_url();
  if (url.empty()) {
    // Behind a transaction pooler a LISTEN would end with its transaction.
    spdlog::info("no LISTEN (database.pooler = \"transaction\" without "
                 "database.listen_url): idle queues look for new jobs every "
                 "{}, and cancel requests reach running jobs with the "
                 "heartbeat",
                 format_duration(st.cfg.config.worker.poll_interval));
    return;
  }
  st.listener = caf::actor_cast<listener_actor>(
    self->spawn<caf::detached + caf::linked>(listener_behavior, std::move(url),
                                             supervisor_actor{self}));
}

void spawn_maintenance(supervisor_pointer self) {
  auto& st = self->state;
  maintenance_config mc;
  mc.store = st.janitor;
  mc.cleanup_interval = st.cfg.config.worker.maintenance_interval;
  mc.rescue_interval = st.cfg.config.worker.heartbeat_interval;
  mc.sample_interval = st.cfg.watcher ? st.cfg.sample_interval
                                      : std::chrono::milliseconds{0};
  mc.periodic.store = st.ticker;
  mc.periodic.schedules = st.cfg.config.periodic;
  st.maintenance = caf::actor_cast<maintenance_actor>(
    self->spawn<caf::linked>(maintenance_behavior, std::move(mc)));
}

/// Tells the lease keeper which pollers' jobs to keep alive.
void announce_pollers(supervisor_pointer self) {
  auto& st = self->state;
  std::vector<poller_actor> pollers;
  for (auto& [queue, p] : st.pollers)
    pollers.push_back(p);
  self->send(st.lease_keeper, pollers_atom::value, std::move(pollers));
}

void spawn_lease_keeper(supervisor_pointer self) {
  auto& st = self->state;
  // Every node is a candidate for leadership; the keeper tells this
  // supervisor whether it leads (leader_atom), which starts or stops
  // maintenance.
  lease_keeper_config lc{st.cfg.config.worker.heartbeat_interval,
                         st.cfg.config.worker.reclaim_window, st.claimer,
                         caf::actor_cast<leadership_actor>(self),
                         of_database(st.cfg)};
  st.lease_keeper = self->spawn<caf::linked>(lease_keeper_behavior, lc);
  announce_pollers(self);
}

void start_components(supervisor_pointer self) {
  auto& st = self->state;
  st.started = true;
  // A shared gate belongs to whoever made it: not linked, never stopped
  // here.
  if (st.cfg.shared_gate)
    st.gate = st.cfg.shared_gate;
  else if (st.cfg.config.worker.idle_poll_permits > 0)
    st.gate = self->spawn<caf::linked>(poll_gate_behavior,
                                       st.cfg.config.worker.idle_poll_permits);
  for (auto& q : st.cfg.config.queues)
    spawn_poller(self, q);
  spawn_listener(self);
  // Maintenance starts when the lease keeper's first round says this node
  // leads (at once when the lease is free).
  spawn_lease_keeper(self);
  spdlog::info("worker {} running: {} queue(s), {} connection(s) for "
               "jobs{}",
               st.cfg.worker_id, st.cfg.config.queues.size(),
               st.completers.size(), of_database(st.cfg));
}

/// Which component an address belongs to ("" if none).
std::string component_of(supervisor_pointer self, const caf::actor_addr& a) {
  auto& st = self->state;
  for (auto& [queue, p] : st.pollers)
    if (a == p.address())
      return "poller:" + queue;
  if (a == caf::actor_cast<caf::actor_addr>(st.listener))
    return "listener";
  if (a == caf::actor_cast<caf::actor_addr>(st.maintenance))
    return "maintenance";
  if (a == st.lease_keeper.address())
    return "lease_keeper";
  if (a == st.gate.address())
    return "gate";
  if (a == st.claimer.address())
    return "storage";
  for (auto& c : st.completers)
    if (a == c.address())
      return "storage";
  if (a == st.janitor.address() || (st.ticker && a == st.ticker.address()))
    return "storage";
  return "";
}

void stop_maintenance(supervisor_pointer self) {
  auto& st = self->state;
  if (!st.maintenance)
    return;
  self->send_exit(st.maintenance, caf::exit_reason::user_shutdown);
  st.maintenance = nullptr;
}

void shut_down_helpers(supervisor_pointer self) {
  auto& st = self->state;
  if (st.listener)
    self->send_exit(st.listener, caf::exit_reason::user_shutdown);
  stop_maintenance(self);
}

// -- the supervisor's messages ------------------------------------------------

/// A linked component stopped: a storage actor or an exit from outside
/// ends the node; any other component is restarted with backoff.
void on_component_exit(supervisor_pointer self, caf::exit_msg& em) {
  auto& st = self->state;
  auto which = component_of(self, em.source);
  if (which.empty() || which == "storage") {
    // Told to stop from outside, or a storage actor died: storage never
    // dies of database errors, so this is a bug; end the node loudly.
    if (which == "storage")
      spdlog::critical("a storage actor stopped: {}",
                       caf::to_string(em.reason));
    self->quit(em.reason);
    return;
  }
  if (st.stopping || !em.reason
      || em.reason == caf::exit_reason::user_shutdown)
    return;
  auto delay = st.restart_backoff.next();
  spdlog::error("{} stopped unexpectedly ({}); restarting it in {} ms",
                which, caf::to_string(em.reason), delay.count());
  self->delayed_send(self, delay, start_atom::value, which);
}

/// Starts the node once the schema checks out and the configured queue
/// limits are written; retries with backoff while the database cannot
/// answer, ends the node on an error only the operator can fix.
void start(supervisor_pointer self) {
  auto& st = self->state;
  if (st.started || st.stopping)
    return;
  self->request(st.claimer, caf::infinite, check_atom::value)
    .then(
      [self](bool) {
        if (self->state.stopping)
          return;
        if (auto& w = self->state.cfg.watcher)
          w->schema_checked(true);
        // The configured queue limits go into queue_controls before
        // any poller claims under them.
        self->request(self->state.claimer, caf::infinite,
                      controls_atom::value)
          .then(
            [self](std::vector<std::string>&) {
              if (self->state.stopping)
                return;
              self->state.check_backoff.reset();
              start_components(self);
            },
            [self](caf::error& err) {
              auto& st = self->state;
              auto delay = st.check_backoff.next();
              spdlog::error("cannot start yet (writing the queue "
                            "limits){}, retrying in {} ms: {}",
                            of_database(st.cfg), delay.count(),
                            render(err));
              self->delayed_send(self, delay, start_atom::value);
            });
      },
      [self](caf::error& err) {
        auto& st = self->state;
        // An outdated schema or a URL the server refuses for good
        // (wrong password, unknown database) is for the operator to
        // fix: end the node instead of retrying.
        if (err.category() == error_category_atom
            && (static_cast<ec>(err.code()) == ec::schema_outdated
                || static_cast<ec>(err.code())
                     == ec::database_misconfigured)) {
          if (st.cfg.watcher
              && static_cast<ec>(err.code()) == ec::schema_outdated)
            st.cfg.watcher->schema_checked(false);
          spdlog::critical("{}", render(err));
          self->quit(err);
          return;
        }
        auto delay = st.check_backoff.next();
        spdlog::error("cannot start yet{}, retrying in {} ms: {}",
                      of_database(st.cfg), delay.count(), render(err));
        self->delayed_send(self, delay, start_atom::value);
      });
}

/// Restarts the component `which` after it stopped unexpectedly (its
/// backoff timer fired).
void restart(supervisor_pointer self, const std::string& which) {
  auto& st = self->state;
  if (st.stopping)
    return;
  if (which == "listener")
    spawn_listener(self);
  else if (which == "maintenance") {
    // Only while this node still leads.
    if (st.leader && !st.maintenance)
      spawn_maintenance(self);
  }
  else if (which == "lease_keeper")
    spawn_lease_keeper(self);
  else if (which == "gate") {
    // Pollers hold the old gate's handle: a gate crash ends the node.
    self->quit(make_error(ec::internal, "the idle poll gate failed"));
  } else if (which.rfind("poller:", 0) == 0) {
    for (auto& q : st.cfg.config.queues)
      if ("poller:" + q.name == which)
        spawn_poller(self, q);
    announce_pollers(self);
  }
}

/// The lease keeper won or lost the leader lease: maintenance runs on the
/// leader only.
void on_leadership(supervisor_pointer self, bool leader) {
  auto& st = self->state;
  if (st.stopping)
    return;
  st.leader = leader;
  if (st.cfg.watcher)
    st.cfg.watcher->leadership(leader);
  if (leader && !st.maintenance)
    spawn_maintenance(self);
  else if (!leader)
    stop_maintenance(self);
}

/// The pollers drained and the leader lease is given up: stops the lease
/// keeper, lets every storage actor flush (the claimer also deletes this
/// process's row), answers the stop requests and quits.
void flush_and_quit(supervisor_pointer self,
                    std::shared_ptr<int64_t> released) {
  auto& st = self->state;
  // Drained: no running job is left to heartbeat.
  if (st.lease_keeper)
    self->send_exit(st.lease_keeper, caf::exit_reason::user_shutdown);
  // Every storage actor flushes; the claimer also deletes this
  // process's row in worker_nodes, after its flush.
  auto flushes = std::make_shared<size_t>(st.completers.size() + 1);
  auto done = [self, released, flushes]() mutable {
    if (--*flushes > 0)
      return;
    spdlog::info("stopped: {} job(s) released{}", *released,
                 of_database(self->state.cfg));
    for (auto& p : self->state.stop_promises)
      p.deliver(*released);
    self->quit(caf::exit_reason::user_shutdown);
  };
  for (auto& c : st.completers)
    self->request(c, caf::infinite, release_atom::value,
                  std::vector<held_job>{}, true)
      .then([done](int64_t) mutable { done(); },
            [done](caf::error&) mutable { done(); });
  self->request(st.claimer, caf::infinite, leave_atom::value)
    .then([done](bool) mutable { done(); },
          [done](caf::error&) mutable { done(); });
}

/// Stops the node (every request gets the first one's answer): no new
/// claims, every poller drains while the leader lease is given up, then
/// every storage actor flushes and the supervisor quits. Replies with the
/// jobs released.
caf::result<int64_t> stop(supervisor_pointer self) {
  auto& st = self->state;
  auto promise = self->make_response_promise<int64_t>();
  st.stop_promises.push_back(promise);
  if (st.stopping)
    return promise; // answered with the first request's drain
  st.stopping = true;
  if (st.cfg.watcher)
    st.cfg.watcher->draining();
  shut_down_helpers(self);
  spdlog::info("stopping: no new claims; draining running jobs{}",
               of_database(st.cfg));
  // Drain every poller and, meanwhile, give the leader lease up (its
  // NOTIFY lets another node take over at once), then let each storage
  // actor commit what it still buffers, then quit.
  auto remaining = std::make_shared<size_t>(st.pollers.size() + 1);
  auto released = std::make_shared<int64_t>(0);
  auto finish = [self, released] { flush_and_quit(self, released); };
  auto resigned = [remaining, finish]() mutable {
    if (--*remaining == 0)
      finish();
  };
  // The resignation waits no longer than the drain (a hung database
  // must not hold the stop; the lease then expires on its own), but at
  // least a moment, so a healthy one hands over at once even with no
  // drain budget.
  auto resign_wait = std::max(st.cfg.config.worker.shutdown_drain,
                              defaults::min_resign_wait);
  if (st.lease_keeper)
    self->request(st.lease_keeper, resign_wait, resign_atom::value)
      .then([resigned](bool) mutable { resigned(); },
            [resigned, self](caf::error& err) mutable {
              spdlog::warn("giving the leader lease up failed ({}){}; "
                           "it expires within the reclaim window",
                           render(err), of_database(self->state.cfg));
              resigned();
            });
  else
    resigned();
  for (auto& [queue, p] : st.pollers)
    self->request(p, caf::infinite, drain_atom::value)
      .then(
        [remaining, released, finish](int64_t n) mutable {
          *released += n;
          if (--*remaining == 0)
            finish();
        },
        [remaining, finish](caf::error& err) mutable {
          spdlog::error("draining a poller failed: {}", render(err));
          if (--*remaining == 0)
            finish();
        });
  return promise;
}

} // namespace

storage::job_store_options store_options(const supervisor_config& cfg) {
  storage::job_store_options opts;
  opts.url = cfg.config.database.url;
  opts.worker_id = cfg.worker_id;
  opts.max_retries = cfg.config.worker.max_retries;
  opts.completed_retention = cfg.config.worker.completed_retention;
  opts.dead_letter_retention = cfg.config.worker.dead_letter_retention;
  opts.reclaim_window = cfg.config.worker.reclaim_window;
  opts.heartbeat_interval = cfg.config.worker.heartbeat_interval;
  opts.prepared_statements = cfg.config.database.pooler != "transaction";
  opts.node = cfg.config.worker.node;
  opts.host = cfg.host;
  opts.version = cfg.version;
  for (auto& q : cfg.config.queues) {
    opts.queues.push_back(q.name);
    opts.queue_limits.push_back(
      {q.name, q.global_concurrency, q.rate_limit,
       static_cast<int64_t>(q.rate_period.count())});
  }
  return opts;
}

storage::follow_up_function follow_ups_of(const supervisor_config& cfg) {
  auto reg = cfg.handlers;
  if (!reg)
    return nullptr;
  // A follow-up commits in its trigger's transaction: its queue must live
  // in this database.
  return [reg, routes = cfg.config,
          database = cfg.database](const job_event& e) {
    auto requests = reg->follow_ups(make_event(e));
    for (auto& r : requests)
      routes.require_database(r.options.queue, database, "it");
    return requests;
  };
}

supervisor_internal::behavior_type
supervisor_behavior(supervisor_pointer self, supervisor_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  auto opts = store_options(st.cfg);
  std::vector<std::string> observed;
  std::optional<std::vector<std::string>> served;
  auto follow_ups = follow_ups_of(st.cfg);
  if (auto reg = st.cfg.handlers) {
    observed = reg->observed_kinds();
    served = reg->kinds();
  }
  auto spawn_storage = [&] {
    if (st.cfg.make_backend)
      return self->spawn<caf::linked>(storage_behavior, st.cfg.make_backend(),
                                      st.cfg.hooks, st.cfg.watcher);
    std::shared_ptr<storage::backend> backend
      = storage::make_pg_backend(opts, observed, follow_ups, served);
    return self->spawn<caf::detached + caf::linked>(storage_behavior,
                                                    std::move(backend),
                                                    st.cfg.hooks,
                                                    st.cfg.watcher);
  };
  // pool_size storage actors, one connection each: every one claims and
  // records outcomes (a claim commits the outcomes waiting on its
  // connection); the first also heartbeats, releases and checks the schema.
  for (int i = 0; i < st.cfg.config.database.pool_size; ++i)
    st.completers.push_back(spawn_storage());
  st.claimer = st.completers.front();
  // Maintenance works over a connection of its own, and so does the
  // periodic scheduler it spawns.
  st.janitor = spawn_storage();
  if (!st.cfg.config.periodic.empty())
    st.ticker = spawn_storage();
  // Every component is linked: when the supervisor quits, they all do.
  // Their exits come here instead of killing the supervisor.
  self->set_exit_handler(
    [self](caf::exit_msg& em) { on_component_exit(self, em); });
  self->send(self, start_atom::value);
  return {
    [self](start_atom) { start(self); },
    [self](start_atom, const std::string& which) { restart(self, which); },
    [self](wake_atom, const std::string& queue) {
      auto& st = self->state;
      for (auto& [name, p] : st.pollers)
        if (queue.empty() || name == queue)
          self->send(p, wake_atom::value);
    },
    [self](elect_atom) {
      auto& st = self->state;
      if (st.lease_keeper && !st.stopping)
        self->send(st.lease_keeper, elect_atom::value);
    },
    [self](leader_atom, bool leader) { on_leadership(self, leader); },
    [self](pause_atom, const std::string& queue, bool paused) {
      for (auto& [name, p] : self->state.pollers)
        if (name == queue)
          self->send(p, pause_atom::value, paused);
    },
    [self](cancel_atom, int64_t id) {
      // Only the poller holding the job acts on it.
      for (auto& [name, p] : self->state.pollers)
        self->send(p, cancel_atom::value, std::vector<int64_t>{id});
    },
    [self](stop_atom) -> caf::result<int64_t> { return stop(self); },
  };
}

} // namespace aw
