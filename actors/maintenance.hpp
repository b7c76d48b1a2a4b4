#pragma once
// Maintenance: the cluster-wide housekeeping, on timers of its own. It runs
// on the cluster's leader alone: the supervisor spawns it when the lease
// keeper reports that this node leads and stops it when it no longer does.
//
// Every rescue_interval it rescues, cluster-wide, running jobs whose lease
// expired (their worker died or hung) and callbacks that timed out (not
// deadline overruns: a run's own executor cancels it at its deadline and
// gives it up one heartbeat interval later; docs/delivery.md) (SKIP LOCKED: safe even if two nodes both
// believe for a moment that they lead). The
// next rescue is armed when the previous one has replied, so rescues never
// pile up behind a slow or hung connection.
//
// Every sample_interval (when metrics are on) it samples every queue's
// depth by state for the observer, again on its own timer and one at a
// time.
//
// Every cleanup_interval it deletes expired dead letters and kept rows past
// their retention, in batches (a full batch goes again at once), then has
// storage empty the ring slot that came due and vacuum the small tables
// whose dead tuples passed their bound (config/defaults.hpp; the storage
// model: docs/storage.md): keeping the hot tables healthy is the runtime's
// job, not the operator's.
//
// With [periodic.NAME] schedules it spawns the periodic scheduler
// (actors/periodic_scheduler.hpp), linked: the scheduler runs where and
// while maintenance does, and a crash of either restarts both.
//
// It works over a storage actor (a connection) of its own, so neither a
// vacuum nor a large rescue ever delays claims or heartbeats (a rescue
// may wait behind a cleanup or vacuum statement on it).

#include <chrono>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/actors/periodic_scheduler.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/actors.hpp"

namespace aw {

/// What maintenance needs: its connection and its intervals.
struct maintenance_config {
  /// Rescues, cleanups and vacuums go here: a connection no other actor
  /// uses.
  storage_actor store;
  /// Between cleanup rounds (worker.maintenance_interval).
  std::chrono::milliseconds cleanup_interval = defaults::maintenance_interval;
  /// Between rescues: the heartbeat interval (worker.heartbeat_interval),
  /// so a dead worker's jobs run again within reclaim_window plus one
  /// interval (docs/delivery.md).
  std::chrono::milliseconds rescue_interval = defaults::heartbeat_interval;
  /// Between samples of the queues' depth for the metrics
  /// (metrics.queue_stats_interval); 0 = never.
  std::chrono::milliseconds sample_interval{0};
  /// The periodic scheduler's configuration; no schedules: none is
  /// spawned.
  periodic_scheduler_config periodic;
};

/// Maintenance, on the cluster's leader only (see the file's comment).
struct maintenance_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "maintenance";
  /// Its configuration.
  maintenance_config cfg;
  /// Rows the cleanup deleted so far.
  int64_t deleted = 0;
};

using maintenance_pointer
  = maintenance_internal::stateful_pointer<maintenance_state>;

maintenance_internal::behavior_type
maintenance_behavior(maintenance_pointer self, maintenance_config cfg);

} // namespace aw
