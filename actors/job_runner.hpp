#pragma once
// Where executors start their jobs' handlers. A handler that never blocks
// runs inline on the executor's CAF thread, an asynchronous one starts
// inline and completes later from anywhere, and one that may block runs on
// the bounded blocking pool, never on CAF's cooperative workers
// (app/registry_runner.hpp, the runtime's runner). Tests plug in a runner
// they control.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "actor_worker/messages/cancellation.hpp"
#include "actor_worker/messages/job.hpp"

namespace aw {

/// Runs callbacks of asynchronous handlers on their executor after a delay.
class timer_service {
public:
  virtual ~timer_service() = default;

  /// Runs `fn` after `delay`, unless run `run` ended first.
  virtual void after(uint64_t run, std::chrono::milliseconds delay,
                     std::function<void()> fn)
    = 0;
};

/// What a run gets from its executor besides the job.
struct run_context {
  /// Cancelled on deadline, lost lease or shutdown.
  cancellation_token cancel;
  /// The executor's number of this run.
  uint64_t run = 0;
  /// Timers of asynchronous handlers (may be null).
  std::shared_ptr<timer_service> timers;
};

/// Starts handlers for the executors: the layer below app/ sees handlers only through this (app/registry_runner.hpp implements it).
class job_runner {
public:
  /// Receives the outcome of a run that did not end inside start().
  using completion = std::function<void(job_outcome)>;

  virtual ~job_runner() = default;

  /// Starts `job`. Returns its outcome when the handler ran to its end
  /// inline; otherwise calls `done` exactly once later, from any thread.
  virtual std::optional<job_outcome> start(claimed_job job,
                                           const run_context& ctx,
                                           completion done)
    = 0;

  /// The executor gave up on job `id`: its handler ignored the cancellation
  /// of its deadline and may still run.
  virtual void abandoned(int64_t id) {
    static_cast<void>(id);
  }
};

} // namespace aw
