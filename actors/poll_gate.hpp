#pragma once
// The idle poll gate: with `idle_poll_permits = N > 0`, only N of a
// process's pollers poll on the idle interval; the rest park until woken
// (NOTIFY, a freed slot, a local enqueue) or until they get a permit. A
// poller gives its permit back while it claims again on its own (a full
// claim), or on a timer of its own (claim backoff, a cluster-wide limit, a
// pause), and asks again once its claims come to rest; the gate hands a
// permit to the poller that has waited longest. A permit also rotates: when
// its holder's idle interval is up and another poller waits, the waiting
// one gets it and polls at once, so jobs that become due by time alone
// (scheduled, backoff, snooze, rescued: no NOTIFY) on a parked poller's
// queue wait at most poll_interval x ceil(pollers / permits). The gate
// never limits running jobs, heartbeats, or claims made on a wake-up.

#include <deque>
#include <unordered_set>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/messages/actors.hpp"

namespace aw {

/// The idle poll gate: hands its permits to pollers that poll on their idle interval.
struct poll_gate_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "poll-gate";
  /// Permits no poller holds.
  int free_permits = 0;
  /// Pollers holding a permit.
  std::vector<poller_actor> holders;
  /// Pollers waiting for one, first come first served.
  std::deque<poller_actor> waiting;
};

using poll_gate_pointer = poll_gate_actor::stateful_pointer<poll_gate_state>;

poll_gate_actor::behavior_type poll_gate_behavior(poll_gate_pointer self,
                                                  int permits);

} // namespace aw
