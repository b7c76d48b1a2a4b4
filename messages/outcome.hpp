#pragma once
// What a handler returns. Returning nothing (void) means completed; so does
// outcome::completed(). Failures are exceptions (see app/handler.hpp).

#include <chrono>
#include <exception>
#include <string>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/job.hpp"

namespace aw {

/// What a handler returns: completed (the default when it returns nothing), retry after a delay, snooze, cancel, or wait for an external callback. Built with the static functions; throwing from a handler is a retryable failure, throwing aw::terminal_error a final one.
class outcome {
public:
  /// The job succeeded.
  static outcome completed() {
    return outcome{outcome_kind::completed, 0, {}};
  }

  /// Run again after `delay`. Counts as a failed attempt: on the job's last
  /// attempt it is dead-lettered instead. `reason` becomes
  /// last_error_message.
  static outcome retry_after(std::chrono::milliseconds delay,
                             std::string reason = "retry requested") {
    return outcome{outcome_kind::retry_after, delay.count(), std::move(reason)};
  }

  /// Run again after `delay` without counting an attempt. Fires no event.
  static outcome snooze(std::chrono::milliseconds delay) {
    return outcome{outcome_kind::snoozed, delay.count(), {}};
  }

  /// Give the job up: state `cancelled`, `reason` recorded.
  static outcome cancel(std::string reason) {
    return outcome{outcome_kind::cancelled, 0, std::move(reason)};
  }

  /// Park the job until an external system resolves its callback (the
  /// callback id is in the committed row, the `waiting_for_callback` event
  /// and its follow-ups) or `timeout` passes (then it is rescued: charged an
  /// attempt and retried).
  static outcome
  wait_for_callback(std::chrono::milliseconds timeout
                    = defaults::callback_timeout) {
    return outcome{outcome_kind::waiting_callback, timeout.count(), {}};
  }

  /// Which outcome it is.
  outcome_kind kind() const {
    return kind_;
  }

  /// retry_after / snooze: the delay; wait_for_callback: the timeout.
  std::chrono::milliseconds delay() const {
    return std::chrono::milliseconds{delay_ms_};
  }

  /// The reason given (retry_after, cancel), "" otherwise.
  const std::string& message() const {
    return message_;
  }

private:
  outcome(outcome_kind kind, int64_t delay_ms, std::string message)
    : kind_(kind), delay_ms_(delay_ms), message_(std::move(message)) {
    // nop
  }

  outcome_kind kind_;
  int64_t delay_ms_;
  std::string message_;
};

/// The outcome of job `id` of `kind` whose handler ended with `o`: messages
/// are sanitized to valid UTF-8 and bounded; a negative delay is a terminal
/// failure.
job_outcome outcome_of(int64_t id, const std::string& kind, const outcome& o);

/// A failure of job `id` (retryable or terminal) with `message`.
job_outcome failure_of(int64_t id, outcome_kind kind,
                       const std::string& message);

/// How a handler's exception `e` ends the run of job `id`: terminal_error
/// is terminal, anything else retryable.
job_outcome outcome_of_exception(int64_t id, const std::string& kind,
                                 std::exception_ptr e);

} // namespace aw
