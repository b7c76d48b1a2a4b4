#pragma once
// The lease keeper: every heartbeat_interval it
//  1. asks the pollers which jobs run here and refreshes all their leases in
//     one statement; jobs whose row is no longer ours (reclaimed, released,
//     deleted) are cancelled and their outcome is never written;
//  2. if the refresh fails (database down), runs the watchdog: a job whose
//     lease was last confirmed reclaim_window - heartbeat_interval ago is
//     abandoned locally before another node may reclaim it, so two workers
//     never both believe they own a job;
//  3. after a refresh, asks which of these jobs an operator asked to cancel
//     (`jobs cancel`, whose NOTIFY the listener may have missed) and tells
//     their pollers;
//  4. refreshes this process's row in worker_nodes (with the number of
//     jobs it holds), so `actor-worker nodes` sees it alive, and in the
//     same statement takes or renews the cluster's leader lease
//     (migrations/012_leader.sql) while the node is a candidate.
// It looks after this node's leases only: rescuing expired ones,
// cluster-wide, is maintenance's work (maintenance.hpp), which runs on the
// leader alone. The keeper tells `leadership` (the supervisor) whether this
// node leads: once at start, then at every change. A refresh that fails
// steps the node down at once (it cannot tell whether another took over);
// the next successful round takes the lease back if it is still free.
// A resigned leader's NOTIFY (`elect`) makes a candidate try at once; at a
// graceful stop `resign` ends the candidacy and gives the lease up.

#include <chrono>
#include <string>
#include <optional>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/messages/actors.hpp"

namespace aw {

/// What the lease keeper needs: its intervals, the storage actor for heartbeats and the leadership actor.
struct lease_keeper_config {
  /// How often the leases of this node's jobs are refreshed (worker.heartbeat_interval).
  std::chrono::milliseconds heartbeat_interval;
  /// A lease older than this is expired (worker.reclaim_window); the watchdog abandons runs one interval before.
  std::chrono::milliseconds reclaim_window;
  /// Heartbeats go here.
  storage_actor store;
  /// Told whether this node is the cluster's leader; none = this node is
  /// no candidate (it only refreshes its worker_nodes row).
  leadership_actor leadership;
  /// Appended to its log lines: "" with one database, " (database
  /// 'orders')" when a node's queues are sharded across several (each has
  /// its own leader).
  std::string log_suffix;
};

/// The lease keeper: heartbeats for this node's held jobs, the watchdog, and the leader lease.
struct lease_keeper_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "lease-keeper";
  /// Its configuration.
  lease_keeper_config cfg;
  /// The pollers whose held jobs it heartbeats.
  std::vector<poller_actor> pollers;
  /// When the last successful heartbeat was sent: every lease it covered
  /// is at least this fresh.
  caf::actor_clock::time_point last_refresh{};
  /// A heartbeat round is waiting for its reply (rounds never pile up).
  bool round_in_flight = false;
  /// Takes the leader lease when it is free (until `resign`).
  bool candidate = false;
  /// Whether this node leads, as last told to `leadership` (none: not told
  /// yet).
  std::optional<bool> leader;
  /// Jobs held at the last round, for a refresh between rounds.
  int64_t held = 0;
};

using lease_keeper_pointer
  = lease_keeper_internal::stateful_pointer<lease_keeper_state>;

lease_keeper_internal::behavior_type
lease_keeper_behavior(lease_keeper_pointer self, lease_keeper_config cfg);

} // namespace aw
