#pragma once
// The executor: the actor that runs the jobs of one handler slot of a
// poller, one job at a time. For each job it starts the handler through the
// job runner (inline, asynchronous, or on the blocking pool), sends the
// outcome to storage, and tells its poller the slot is free. A handler
// that never blocks costs no thread hand-off at all. Executors are kept
// from job to job: creating and destroying an actor per job cost more than
// a no-op job (each termination wakes CAF's clock thread).
//
// It owns each run's cancellation token: the token is cancelled when the
// deadline passes (the outcome then becomes a deadline rescue), when the
// lease turns out to be lost (no outcome is written), and when the
// executor stops for any other reason (shutdown), and when an operator
// asks to cancel the job (`actor-worker jobs cancel`): then whatever the
// handler returns is recorded as `cancelled` (a failure is not retried, a
// snooze does not run again), except `completed`, which stands (the work
// was done; a warning says the cancel came too late). A handler that ignores
// its deadline's cancellation for a further grace is abandoned: the run is
// recorded as a rescue and the handler's late result is dropped.
//
// Every message about a run carries the run's number: what arrives for an
// earlier run (a late result of an abandoned handler, a timer of a finished
// one) is ignored.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/actors/job_runner.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/actors.hpp"

namespace aw {

/// The reason recorded for a job cancelled by `actor-worker jobs cancel`.
inline constexpr const char* cancel_request_message
  = "cancelled on request (actor-worker jobs cancel)";

/// Who an executor works with.
struct executor_config {
  /// Runs the handlers (inline, asynchronously or on the blocking pool).
  std::shared_ptr<job_runner> runner;
  /// The poller whose slot this is; outcomes go back to it.
  poller_actor poller;
  /// Receives the `started` event of observed kinds (may be null).
  hook_dispatcher_actor hooks;
  /// How long past its deadline a handler that ignores the cancellation is
  /// waited for before the run is given up.
  std::chrono::milliseconds abandon_grace = defaults::heartbeat_interval;
};

/// The run in progress.
struct executor_run {
  /// The job being run.
  int64_t job_id = 0;
  /// The run's lease (claimed_job::lease).
  int64_t lease = 0;
  /// The run's attempt (claimed_job::attempt).
  int32_t attempt = 0;
  /// The kind has hooks or follow-ups: send its `started` event.
  bool observed = false;
  /// The run's deadline; 0 = none.
  int64_t deadline_ms = 0;
  /// The job's kind and queue, handed on with the outcome for its log line.
  std::string kind;
  /// The job's queue.
  std::string queue;
  /// When the handler started.
  std::chrono::steady_clock::time_point started;
  /// Fired on deadline, lost lease, `jobs cancel` or shutdown.
  cancellation_token cancel;
  /// The deadline passed before the handler returned.
  bool overran = false;
  /// The job is no longer ours: its outcome must not be written.
  bool lost = false;
  /// An operator asked to cancel it: the outcome becomes `cancelled`
  /// unless the handler completed.
  bool cancel_requested = false;
};

/// An executor: one handler slot of a poller, kept from job to job.
struct executor_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "executor";
  /// Who it works with.
  executor_config cfg;
  /// Runs started so far; the current one's number.
  uint64_t run_number = 0;
  /// A run is in progress.
  bool busy = false;
  /// The run in progress (valid while busy).
  executor_run current;
  /// The current run's token, shared with the exit functor (which runs
  /// after the state is gone); empty between runs.
  std::shared_ptr<std::optional<cancellation_token>> running_token
    = std::make_shared<std::optional<cancellation_token>>();
  /// Timers of asynchronous handlers, armed from any thread.
  std::shared_ptr<timer_service> timers;
  /// Callbacks of those timers, by id (shared with `timers`).
  struct timer_table {
    /// Guards next_id and pending.
    std::mutex mtx;
    /// The id of the next timer.
    uint64_t next_id = 0;
    /// Callbacks of armed timers, by id.
    std::unordered_map<uint64_t, std::function<void()>> pending;
  };
  /// The timers' callbacks (shared with `timers`).
  std::shared_ptr<timer_table> timer_callbacks;
};

using executor_pointer = executor_internal::stateful_pointer<executor_state>;

executor_internal::behavior_type executor_behavior(executor_pointer self,
                                                   executor_config cfg);

} // namespace aw
