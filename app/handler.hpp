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

#include "app/cancellation.hpp"

namespace aw {

/// The job being run, as its handler sees it.
struct job_context {
  int64_t id = 0;
  std::string kind;
  std::string queue;
  /// Times started, including this run (1 on the first run).
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

} // namespace aw
