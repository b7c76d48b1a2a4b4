#pragma once
// Where executors start their jobs' handlers. A handler that never blocks
// runs inline on the executor's CAF thread, an asynchronous one starts
// inline and completes later from anywhere, and one that may block runs on
// the bounded blocking pool, never on CAF's cooperative workers. Tests plug
// in a runner they control.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "app/cancellation.hpp"
#include "messages/job.hpp"

namespace aw {

class blocking_pool;
class registry;

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

class job_runner {
public:
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

/// The runtime's runner: a registry's handlers, blocking ones on a pool of
/// at most `max_blocking_threads` threads.
class registry_runner : public job_runner {
public:
  registry_runner(std::shared_ptr<const registry> reg,
                  size_t max_blocking_threads);
  ~registry_runner() override;

  std::optional<job_outcome> start(claimed_job job, const run_context& ctx,
                                   completion done) override;

  void abandoned(int64_t id) override;

  /// Threads of the blocking pool alive now.
  size_t blocking_threads() const;

private:
  std::shared_ptr<const registry> reg_;
  std::shared_ptr<blocking_pool> pool_;
  /// Blocking jobs whose handler runs now, and those of them the executor
  /// gave up on (each holds a thread the pool may replace meanwhile).
  struct blocking_runs {
    std::mutex mtx;
    std::unordered_set<int64_t> running;
    std::unordered_set<int64_t> abandoned;
  };
  std::shared_ptr<blocking_runs> runs_;
};

} // namespace aw
