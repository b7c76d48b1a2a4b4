#pragma once
// The poller: claims due jobs of one queue and spawns one executor per job,
// never more than the queue's free slots.
//
// It claims when woken (NOTIFY, local enqueue), when a slot frees up while
// the last claim came back full (more work is likely waiting), and every
// poll_interval when idle. Wake-ups coalesce through the mailbox: a burst
// of finished jobs leads to one claim of all the freed slots. A failed
// claim is logged at ERROR and retried with backoff 1 s, 2 s ... 30 s.

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/backoff.hpp"
#include "actors/job_dispatcher.hpp"
#include "messages/actors.hpp"

namespace aw {

struct poller_config {
  /// The queue this poller claims from.
  std::string queue = defaults::queue;
  /// Executors running at once (the queue's concurrency on this node).
  int concurrency = defaults::concurrency;
  /// Idle poll interval.
  std::chrono::milliseconds poll_interval = defaults::poll_interval;
  /// Drain budget at shutdown.
  std::chrono::milliseconds shutdown_drain = defaults::shutdown_drain;
  /// How often a summary of recent activity is logged (when there was any).
  std::chrono::milliseconds report_interval = defaults::report_interval;
  /// Claims go here.
  storage_actor claimer;
  /// Outcomes go here, spread by job id.
  std::vector<storage_actor> completers;
  /// Runs the handlers.
  std::shared_ptr<job_dispatcher> dispatcher;
  /// Deadline of runs whose job has none of its own; 0 = none.
  std::chrono::milliseconds default_deadline{0};
  /// The idle poll gate, if the process has one: then this poller polls on
  /// the idle interval only while it holds a permit.
  poll_gate_actor gate;
};

/// A job this poller started.
struct running_job {
  executor_actor executor;
  /// When it was claimed (actor clock): the lease is at least this fresh.
  caf::actor_clock::time_point claimed_at;
};

struct poller_state {
  static inline const char* name = "poller";

  poller_config cfg;
  /// The executor of each running job.
  std::unordered_map<int64_t, running_job> running;
  /// Running jobs that are no longer ours (lease lost or abandoned): never
  /// released, their outcome never recorded.
  std::unordered_set<int64_t> lost;
  /// Holds an idle poll permit (always true without a gate).
  bool has_permit = true;
  /// Asked the gate for a permit and waits for it.
  bool permit_requested = false;
  /// A claim request is waiting for its reply.
  bool claim_in_flight = false;
  /// A claim_atom is on its way through the mailbox.
  bool claim_queued = false;
  /// Work is likely waiting: the last claim came back full, or a wake-up
  /// arrived since.
  bool maybe_more = true;
  /// Claims failed; only the backoff timer may claim again.
  bool in_backoff = false;
  /// Stopped claiming for shutdown.
  bool draining = false;
  /// The pending drain reply, if a drain was requested.
  caf::typed_response_promise<int64_t> drain_promise;
  bool drain_pending = false;
  /// The drain budget ran out.
  bool drain_budget_spent = false;
  /// Jobs claimed after the drain began: never started, to be released.
  std::vector<int64_t> unstarted;
  /// Timers carry the generation they were armed in; a newer arm makes
  /// older ones stale (CAF 0.17 cannot cancel a delayed message).
  uint64_t timer_generation = 0;
  backoff claim_backoff;
  /// Outcomes since the last activity report.
  uint64_t completed = 0;
  uint64_t failed = 0;
  uint64_t stale = 0;
  /// Claim statements issued (for tests and the exit log).
  uint64_t claims = 0;
  /// Jobs claimed in total.
  uint64_t claimed = 0;

  int free_slots() const {
    return cfg.concurrency - static_cast<int>(running.size());
  }
};

using poller_pointer = poller_actor::stateful_pointer<poller_state>;

poller_actor::behavior_type poller_behavior(poller_pointer self,
                                            poller_config cfg);

} // namespace aw
