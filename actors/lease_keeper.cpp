#include "actor_worker/actors/lease_keeper.hpp"

#include <algorithm>
#include <map>
#include <memory>

#include <spdlog/spdlog.h>

#include "actor_worker/config/config.hpp"
#include "actor_worker/config/lease.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw {

namespace {

using clock_type = caf::actor_clock;

/// The jobs the node holds: which poller holds each, its lease, and when
/// it was claimed.
struct snapshot {
  std::vector<int64_t> ids;
  std::vector<int64_t> leases;
  std::vector<clock_type::time_point> claimed_at;
  std::vector<size_t> poller_of;
};

/// Records whether this node leads and tells `leadership` when that
/// changed (or was never told).
void set_leader(lease_keeper_pointer self, bool leader) {
  auto& st = self->state;
  leader = leader && st.candidate;
  if (st.leader && *st.leader == leader)
    return;
  bool was_told = st.leader.has_value();
  st.leader = leader;
  if (leader)
    spdlog::info("this process is now the cluster's leader: it runs the "
                 "cluster's maintenance{}",
                 st.cfg.log_suffix);
  else if (was_told)
    spdlog::info("this process is no longer the cluster's leader{}",
                 st.cfg.log_suffix);
  if (st.cfg.leadership)
    self->send(st.cfg.leadership, leader_atom::value, leader);
}

/// Refreshes this process's row in worker_nodes and, while a candidate,
/// takes or renews the leader lease in the same statement.
void refresh_node(lease_keeper_pointer self, int64_t held) {
  auto& st = self->state;
  st.held = held;
  self->request(st.cfg.store, st.cfg.heartbeat_interval, node_atom::value,
                held, st.candidate)
    .then([self](bool leader) { set_leader(self, leader); },
          [self](caf::error&) {
            // Storage logged it. Whether the lease was renewed is unknown:
            // step down rather than risk two leaders for long.
            set_leader(self, false);
          });
}

void end_round(lease_keeper_pointer self) {
  self->state.round_in_flight = false;
  self->delayed_send(self, self->state.cfg.heartbeat_interval,
                     tick_atom::value);
}

/// Tells each poller which of its jobs are no longer ours.
void report_lost(lease_keeper_pointer self, const snapshot& snap,
                 const std::vector<size_t>& lost, const std::string& reason,
                 bool hand_back) {
  std::map<size_t, std::vector<int64_t>> by_poller;
  for (auto i : lost)
    by_poller[snap.poller_of[i]].push_back(snap.ids[i]);
  for (auto& [p, ids] : by_poller)
    self->send(self->state.pollers[p], lost_atom::value, ids, reason,
               hand_back);
}

/// The durable side of `jobs cancel`: asks which held jobs an operator
/// asked to cancel (a NOTIFY may have been missed while the LISTEN
/// connection was away) and tells their pollers; then the round ends.
void check_cancel_requests(lease_keeper_pointer self,
                           std::shared_ptr<snapshot> snap) {
  auto& st = self->state;
  self->request(st.cfg.store, st.cfg.heartbeat_interval, cancel_atom::value,
                snap->ids)
    .then(
      [self, snap](std::vector<int64_t>& requested) {
        std::sort(requested.begin(), requested.end());
        std::map<size_t, std::vector<int64_t>> by_poller;
        for (size_t i = 0; i < snap->ids.size(); ++i)
          if (std::binary_search(requested.begin(), requested.end(),
                                 snap->ids[i]))
            by_poller[snap->poller_of[i]].push_back(snap->ids[i]);
        for (auto& [p, ids] : by_poller)
          self->send(self->state.pollers[p], cancel_atom::value, ids);
        end_round(self);
      },
      [self](caf::error&) {
        // Storage logged it; the next round asks again.
        end_round(self);
      });
}

void heartbeat(lease_keeper_pointer self, std::shared_ptr<snapshot> snap) {
  auto& st = self->state;
  // This process's row in worker_nodes and the leader lease, every round,
  // idle or not (storage logs a failure; the next round tries again).
  refresh_node(self, static_cast<int64_t>(snap->ids.size()));
  if (snap->ids.empty()) {
    st.last_refresh = self->clock().now();
    end_round(self);
    return;
  }
  auto sent_at = self->clock().now();
  // The watchdog runs when this request fails. A database that hangs
  // (a partition) rather than refusing fails it only by the timeout, and
  // rounds then come every two intervals; so wait no longer than until the
  // first of these jobs is due to be abandoned, or the watchdog would act
  // up to a whole interval late, when another node may already reclaim.
  auto limit =
    lease_length(st.cfg.reclaim_window, st.cfg.heartbeat_interval);
  auto due = sent_at + limit;
  for (auto claimed : snap->claimed_at)
    due = std::min(due, std::max(claimed, st.last_refresh) + limit);
  auto timeout = std::max(
    std::chrono::milliseconds{1},
    std::min(st.cfg.heartbeat_interval,
             std::chrono::ceil<std::chrono::milliseconds>(due - sent_at)));
  self->request(st.cfg.store, timeout, heartbeat_atom::value, snap->leases)
    .then(
      [self, snap, sent_at](std::vector<int64_t>& alive) {
        auto& st = self->state;
        st.last_refresh = sent_at;
        std::sort(alive.begin(), alive.end());
        std::vector<size_t> lost;
        for (size_t i = 0; i < snap->ids.size(); ++i)
          if (!std::binary_search(alive.begin(), alive.end(),
                                  snap->leases[i]))
            lost.push_back(i);
        if (!lost.empty())
          report_lost(self, *snap, lost,
                      "lease lost: the job is no longer running under this "
                      "worker (reclaimed, released or deleted meanwhile)",
                      false);
        check_cancel_requests(self, snap);
      },
      [self, snap](caf::error& err) {
        auto& st = self->state;
        // The watchdog: give up a job locally one heartbeat before another
        // node may reclaim it.
        auto now = self->clock().now();
        auto limit =
          lease_length(st.cfg.reclaim_window, st.cfg.heartbeat_interval);
        std::vector<size_t> abandon;
        for (size_t i = 0; i < snap->ids.size(); ++i) {
          auto fresh = std::max(snap->claimed_at[i], st.last_refresh);
          if (now - fresh >= limit)
            abandon.push_back(i);
        }
        spdlog::error("lease keeper: refreshing {} lease(s) failed: {}{}",
                      snap->ids.size(), render(err),
                      abandon.empty()
                        ? std::string{}
                        : "; abandoning " + std::to_string(abandon.size())
                            + " job(s) before their lease expires");
        if (!abandon.empty())
          report_lost(self, *snap, abandon,
                      "abandoned by the watchdog: its lease could not be "
                      "refreshed for "
                        + format_duration(limit)
                        + " and another worker may reclaim it",
                      true);
        end_round(self);
      });
}

void start_round(lease_keeper_pointer self) {
  auto& st = self->state;
  if (st.round_in_flight)
    return;
  st.round_in_flight = true;
  auto snap = std::make_shared<snapshot>();
  auto remaining = std::make_shared<size_t>(st.pollers.size());
  if (*remaining == 0) {
    heartbeat(self, snap);
    return;
  }
  for (size_t p = 0; p < st.pollers.size(); ++p)
    self->request(st.pollers[p], st.cfg.heartbeat_interval, running_atom::value)
      .then(
        [self, snap, remaining, p](std::vector<held_job>& held) {
          for (auto& h : held) {
            snap->ids.push_back(h.id);
            snap->leases.push_back(h.lease);
            snap->claimed_at.push_back(
              clock_type::time_point{std::chrono::duration_cast<
                clock_type::time_point::duration>(
                std::chrono::nanoseconds{h.claimed_at_ns})});
            snap->poller_of.push_back(p);
          }
          if (--*remaining == 0)
            heartbeat(self, snap);
        },
        [self, snap, remaining](caf::error&) {
          // A poller that is gone (restarting) has nothing to keep alive.
          if (--*remaining == 0)
            heartbeat(self, snap);
        });
}

} // namespace

lease_keeper_internal::behavior_type
lease_keeper_behavior(lease_keeper_pointer self, lease_keeper_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.candidate = static_cast<bool>(st.cfg.leadership);
  st.last_refresh = self->clock().now();
  // In worker_nodes (and, if the lease is free, leading) at once, not one
  // heartbeat interval later.
  refresh_node(self, 0);
  self->delayed_send(self, st.cfg.heartbeat_interval, tick_atom::value);
  return {
    [self](tick_atom) { start_round(self); },
    [self](pollers_atom, std::vector<poller_actor>& pollers) {
      self->state.pollers = std::move(pollers);
    },
    [self](elect_atom) {
      auto& st = self->state;
      if (st.candidate && !st.leader.value_or(false))
        refresh_node(self, st.held);
    },
    [self](resign_atom) -> caf::result<bool> {
      auto& st = self->state;
      st.candidate = false;
      auto promise = self->make_response_promise<bool>();
      self->request(st.cfg.store, st.cfg.heartbeat_interval,
                    resign_atom::value)
        .then(
          [self, promise](bool held) mutable {
            set_leader(self, false);
            promise.deliver(held);
          },
          [self, promise](caf::error& err) mutable {
            // The lease then runs out by itself, within the reclaim window.
            set_leader(self, false);
            promise.deliver(std::move(err));
          });
      return promise;
    },
  };
}

} // namespace aw
