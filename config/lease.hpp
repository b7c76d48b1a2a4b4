#pragma once
// The length of a lease: the one rule every holder of a lease (a job's run,
// the cluster leader) and everything that must end before a lease does
// (the watchdog, a transactional run's transaction) derives its time from.

#include <chrono>

namespace aw {

/// How long a lease is safely held past the refresh that last confirmed
/// it: the reclaim window less one heartbeat interval.
///
/// Another node may reclaim a job's lease once it is older than
/// `reclaim_window` (the rescue). Its holder stops relying on it one
/// heartbeat interval earlier: the watchdog, which acts with the heartbeat
/// rounds, abandons the run by then, so the run has stopped before anyone
/// may take the job over; and the leader's lease row expires then, so that
/// the next candidate round, at most one interval later, elects a new leader
/// within the reclaim window. Config validation keeps `reclaim_window` at
/// least defaults::min_heartbeats_per_window intervals, so this is at least
/// two intervals. See docs/delivery.md (Watchdog) and docs/clusters.md.
///
/// What must end before the lease does and starts at an arbitrary moment
/// rather than at a refresh (a transactional run's transaction) has one
/// interval less left: the refresh that last confirmed the lease may
/// already be up to one interval old when it starts.
constexpr std::chrono::milliseconds
lease_length(std::chrono::milliseconds reclaim_window,
             std::chrono::milliseconds heartbeat_interval) {
  return reclaim_window - heartbeat_interval;
}

} // namespace aw
