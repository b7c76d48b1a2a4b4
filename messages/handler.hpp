#pragma once
// What a job handler sees and how it reports failure.
//
// A handler returns normally to complete its job, throws aw::terminal_error
// to send it straight to the dead letter queue, and throws anything else to
// fail the attempt retryably (rescheduled with backoff, dead-lettered on the
// last attempt). The exception's message becomes `last_error_message`.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "actor_worker/messages/cancellation.hpp"

namespace aw {

/// The job being run, as its handler sees it.
struct job_context {
  /// The job's id.
  int64_t id = 0;
  /// The job's kind.
  std::string kind;
  /// The job's queue.
  std::string queue;
  /// Times started, including this run (1 on the first run); snoozed and
  /// released runs count too. The attempt as the retry limit counts it is
  /// error_count + 1 (event::attempt).
  int attempt = 0;
  /// Failed attempts charged before this run.
  int error_count = 0;
  /// The job's metadata column as JSON text.
  std::string metadata;
  /// Cancelled when the run must stop: deadline exceeded, lease lost, or
  /// abandoned by the watchdog. Long handlers check it or sleep through it
  /// (`ctx.cancel.sleep_for(...)`); whatever they return after it fired
  /// is not recorded as a success.
  cancellation_token cancel;
};

/// Thrown by a handler: the job failed for good and must not be retried.
struct terminal_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where a synchronous handler runs.
enum class handler_mode : uint8_t {
  /// It may block (I/O, sleeps, locks, long computations): it runs on the
  /// runtime's bounded pool of blocking threads. The default, and always
  /// safe.
  blocking,
  /// It never blocks and returns within microseconds: it runs inline on
  /// the executor's CAF thread, saving the hand-off to another thread that
  /// would cost more than the handler. A handler that blocks here stalls
  /// the actors that share the thread: when in doubt, leave it blocking.
  non_blocking,
};

/// Tag for registry::add: the handler never blocks (handler_mode).
inline constexpr handler_mode non_blocking = handler_mode::non_blocking;

} // namespace aw
