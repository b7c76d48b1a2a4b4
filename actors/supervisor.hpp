#pragma once
// The supervisor: the root of a node's actors.
//
// At start it spawns the storage actors, runs the schema check (retrying
// with backoff while the database is unreachable; stopping with an error
// when the schema is out of date), then spawns one poller per queue, the
// listener and the lease keeper. Maintenance runs while the lease keeper
// reports that this node leads the cluster (a lease row elects it). It
// routes wake-ups to pollers, restarts a crashed poller, listener,
// maintenance or lease keeper with backoff, and on stop resigns the
// leadership, drains the pollers, flushes storage and quits.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actor_worker/actors/backoff.hpp"
#include "actor_worker/actors/job_runner.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/actors.hpp"
#include "actor_worker/messages/observer.hpp"
#include "actor_worker/storage/backend.hpp"

namespace aw::storage {
struct job_store_options;
}

namespace aw {

class job_handlers;

/// What a supervisor runs: one database's part of a node, and the runner, hooks and observer it shares with the others.
struct supervisor_config {
  /// What this supervisor runs: one database's part of a node
  /// (runtime_config::for_database): its [database], queues and schedules.
  runtime_config config;
  /// That database's name ("default" for [database]), for logs and for
  /// refusing follow-ups to queues of other databases.
  std::string database = defaults::database_name;
  /// Written to locked_by: node name, process id and a random suffix.
  std::string worker_id;
  /// This host's name and the runtime's version, for worker_nodes.
  std::string host;
  /// The runtime's version, for worker_nodes.
  std::string version;
  /// Starts the handlers.
  std::shared_ptr<job_runner> runner;
  /// Hooks and follow-ups.
  std::shared_ptr<const job_handlers> handlers;
  /// Runs the hooks of committed transitions.
  hook_dispatcher_actor hooks;
  /// An idle poll gate shared with other runtimes (app/idle_poll_gate.hpp);
  /// when set it replaces worker.idle_poll_permits.
  poll_gate_actor shared_gate;
  /// Metrics and health (may be null): storage, pollers and maintenance
  /// report to it.
  std::shared_ptr<observer> watcher;
  /// How often maintenance samples the queues' depth for `watcher`; 0 =
  /// never.
  std::chrono::milliseconds sample_interval{0};
  /// Makes the backend of each storage actor; unset: PostgreSQL
  /// (pg_backend). The deterministic simulation (test/sim) plugs its model
  /// database in here; its storage actors then run on the cooperative
  /// scheduler, since the model never blocks and a detached actor would
  /// escape the test coordinator.
  std::function<std::shared_ptr<storage::backend>()> make_backend;
};

/// The supervisor: spawns, links and restarts one database's actors, and stops them in order.
struct supervisor_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "supervisor";

  /// Its configuration.
  supervisor_config cfg;
  /// Heartbeats, releases and the schema check: the first of
  /// `completers`.
  storage_actor claimer;
  /// The storage actors (database.pool_size): claims and outcomes, in
  /// parallel.
  std::vector<storage_actor> completers;
  /// Maintenance's connection: rescues, cleanup and vacuum.
  storage_actor janitor;
  /// The periodic scheduler's connection (only with [periodic.NAME]
  /// schedules; connects at its first statement).
  storage_actor ticker;
  /// One poller per served queue, by queue name.
  std::map<std::string, poller_actor> pollers;
  /// Opaque handles: the supervisor links them and stops them, and sends
  /// them nothing.
  listener_actor listener;
  /// Maintenance (on the leader only).
  maintenance_actor maintenance;
  /// The lease keeper.
  lease_keeper_actor lease_keeper;
  /// The shared gate, or this node's own (worker.idle_poll_permits > 0),
  /// or none.
  poll_gate_actor gate;
  /// Backoff of the schema check while the database is unreachable.
  backoff check_backoff;
  /// Backoff of component restarts.
  backoff restart_backoff;
  /// Whether this node is the cluster's leader (the lease keeper says):
  /// maintenance runs only then.
  bool leader = false;
  /// The schema check passed and the components were spawned.
  bool started = false;
  /// A stop was asked: no restart any more.
  bool stopping = false;
  /// Who asked to stop (the runtime, and another database's supervisor
  /// ending in error): each is answered when the drain is done.
  std::vector<caf::typed_response_promise<int64_t>> stop_promises;
};

using supervisor_pointer
  = supervisor_internal::stateful_pointer<supervisor_state>;

supervisor_internal::behavior_type
supervisor_behavior(supervisor_pointer self, supervisor_config cfg);

/// The options of the connections of `cfg`'s database (its storage actors,
/// and the runtime's transactional pool): URL, worker id, retention,
/// lease timing, this process and its queues.
storage::job_store_options store_options(const supervisor_config& cfg);

/// The durable follow-ups of `cfg`'s handlers, computed in the transaction
/// of the transition that triggers them; each must go to a queue of
/// `cfg`'s database. None without handlers.
storage::follow_up_function follow_ups_of(const supervisor_config& cfg);

} // namespace aw
