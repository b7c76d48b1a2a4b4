#pragma once
// Asynchronous handlers: a handler that waits on a timer or on I/O without
// holding a thread. It starts on the executor's CAF thread, arranges for
// its work to happen elsewhere (an HTTP client's callback, a timer), and
// completes the run later through its job_promise, from any thread. Ten
// thousand such runs waiting at once cost ten thousand small actors, not
// ten thousand threads.
//
//   reg.add_async<ping_args>("ping", [](const ping_args& a,
//                                       const aw::async_context& ctx,
//                                       aw::job_promise done) {
//     ctx.after(a.delay, [done] { done.complete(); });
//   });

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "actor_worker/messages/handler.hpp"
#include "actor_worker/messages/outcome.hpp"
#include "actor_worker/messages/job.hpp"

namespace aw {

/// Completes an asynchronous run. Copies share one run; the first call of
/// any completing function wins and the later ones do nothing, so a handler
/// may hand copies to several callbacks (a result and a timeout, say).
/// Safe to call from any thread. A run whose promise is never completed
/// holds its slot until its deadline (if any) or its lease is lost.
class job_promise {
public:
  /// Delivers the run's outcome (called once, by the runtime).
  using sink = std::function<void(job_outcome)>;

  /// A promise for the run of job `job_id` of `kind` that hands its outcome to `deliver` (made by the runtime, not by handlers).
  job_promise(int64_t job_id, std::string kind, sink deliver);

  /// The job succeeded.
  void complete() const {
    finish(outcome::completed());
  }

  /// Ends the run with `o` (retry_after, snooze, cancel, wait_for_callback).
  void finish(const outcome& o) const;

  /// The attempt failed and may be retried (as a thrown exception would).
  void fail(const std::string& message) const;

  /// The job failed for good: dead-lettered (as terminal_error would).
  void fail_terminal(const std::string& message) const;

  /// Ends the run as if the handler had thrown `e`: terminal_error is
  /// terminal, anything else retryable.
  void fail(std::exception_ptr e) const;

  /// True once the run was completed.
  bool done() const;

private:
  void deliver(job_outcome out) const;

  struct state;
  std::shared_ptr<state> state_;
};

/// What an asynchronous handler sees: the job, its cancellation token (it
/// fires on deadline, lost lease or shutdown), and timers that wait without
/// holding a thread.
struct async_context : job_context {
  /// Schedules `fn` after `delay`, given by the executor.
  using timer_function
    = std::function<void(std::chrono::milliseconds, std::function<void()>)>;

  /// Runs `fn` after `delay` on the runtime's actor threads, unless the run
  /// ended first. `fn` must not block.
  void after(std::chrono::milliseconds delay, std::function<void()> fn) const {
    if (timer)
      timer(delay, std::move(fn));
  }

  /// Set by the executor: how after() schedules its timers (empty outside a run: after() then does nothing).
  timer_function timer;
};

} // namespace aw
