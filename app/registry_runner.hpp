#pragma once
// The runtime's job runner: non-blocking handlers inline, asynchronous ones
// started inline, and the others on the blocking pool.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include "actor_worker/actors/job_runner.hpp"
#include "actor_worker/messages/job_handlers.hpp"

namespace aw {

class blocking_pool;

/// The runtime's runner: the registered handlers, blocking ones on a pool of
/// at most `max_blocking_threads` threads.
class registry_runner : public job_runner {
public:
  /// Runs a transactional kind's job to its end on the calling thread
  /// (registry::run_transactional on the job's database's pool).
  using transactional_run = std::function<job_outcome(
    const claimed_job& job, const cancellation_token& cancel)>;

  /// Starts a transactional kind's run without a thread of its own
  /// (registry::start_transactional on the job's database's pool): its
  /// transaction runs on a thread the given spawner lends, and its outcome
  /// goes to the given callback. False when the kind cannot start so (it
  /// then runs through transactional_run).
  using transactional_start = std::function<bool(
    const claimed_job& job, const cancellation_token& cancel,
    std::function<void(std::function<void()>)> spawn,
    std::function<void(job_outcome)> done)>;

  /// Registers a callback id for `job`'s run on its database, timing out
  /// `timeout` from now (storage::transaction_pool::register_callback):
  /// the id, or nothing when the run no longer holds the job. Throws what
  /// the database throws.
  using callback_registrar = std::function<std::optional<std::string>(
    const claimed_job& job, std::chrono::milliseconds timeout,
    const cancellation_token& cancel)>;

  /// Runs the handlers of `reg`, the blocking ones on a pool of at most
  /// `max_blocking_threads` threads, and so do transactional ones, through
  /// `transactional` (none: they fail, as without a database). Blocking
  /// handlers register callback ids through `registrar`, and so do
  /// asynchronous kinds that register before they start (none: they
  /// cannot, as without a database).
  /// Transactional kinds that can start without a thread go through
  /// `start_tx` (none: all run through `transactional`).
  registry_runner(std::shared_ptr<const job_handlers> reg,
                  size_t max_blocking_threads,
                  transactional_run transactional = nullptr,
                  callback_registrar registrar = nullptr,
                  transactional_start start_tx = nullptr);
  ~registry_runner() override;

  std::optional<job_outcome> start(claimed_job job, const run_context& ctx,
                                   completion done) override;

  void abandoned(int64_t id) override;

  /// Cuts every handler off the actor system: from now on a run's outcome
  /// and its timers go nowhere, and the executors' callbacks are dropped
  /// (call it while the actor system is alive). Then waits up to `wait`
  /// for blocking handlers still running to return. Returns the handlers
  /// whose run had not ended: blocking ones still running (they finish on
  /// their detached threads) and asynchronous ones never completed.
  int64_t stop(std::chrono::milliseconds wait);

private:
  /// `job`'s callback registration through registrar_ (none without one).
  std::shared_ptr<run_callback> callback_of(const claimed_job& job,
                                            const cancellation_token& cancel) const;

  std::shared_ptr<const job_handlers> reg_;
  transactional_run transactional_;
  callback_registrar registrar_;
  transactional_start start_tx_;
  std::shared_ptr<blocking_pool> pool_;
  /// Blocking jobs whose handler runs now, and those of them the executor
  /// gave up on (each holds a thread the pool may replace meanwhile).
  struct blocking_runs {
    std::mutex mtx;
    std::unordered_set<int64_t> running;
    std::unordered_set<int64_t> abandoned;
  };
  std::shared_ptr<blocking_runs> runs_;
  struct gate;
  std::shared_ptr<gate> gate_;
};

} // namespace aw
