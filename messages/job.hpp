#pragma once
// The two values that travel between actors on the hot path: a claimed job
// (storage -> poller -> executor) and its outcome (executor -> storage).

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace aw {

/// A job this worker has claimed: the row's state is now `running` and
/// `locked_by` is this worker. Args and metadata stay JSON text until a
/// handler parses them, so the actors never pay for a parse they don't need.
struct claimed_job {
  int64_t id = 0;
  std::string kind;
  std::string queue;
  /// The `args` column as JSON text.
  std::string args;
  int32_t priority = 0;
  /// Times started, including this run (so 1 on the first run).
  int32_t attempt = 0;
  /// Failed attempts charged before this run.
  int32_t error_count = 0;
  /// The job's own attempt limit; 0 when it uses the worker's max_retries.
  int32_t max_attempts = 0;
  /// The `metadata` column as JSON text.
  std::string metadata;
  /// This run's deadline in milliseconds after the claim; 0 for none.
  int64_t deadline_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claimed_job& x) {
  return f(caf::meta::type_name("claimed_job"), x.id, x.kind, x.queue, x.args,
           x.priority, x.attempt, x.error_count, x.max_attempts, x.metadata,
           x.deadline_ms);
}

/// How a run ended, as far as storage is concerned.
enum class outcome_kind : uint8_t {
  /// The handler succeeded: state `completed` (or the row is deleted when
  /// the completed retention is 0).
  completed,
  /// The handler failed and may run again: rescheduled after
  /// 2^(error_count + 1) seconds, or dead-lettered on its last attempt.
  retryable_failure,
  /// The handler failed for good (malformed args, unknown kind, or a
  /// terminal error): moved to the dead letter queue at once.
  terminal_failure,
  /// The run overran its deadline and was cancelled: a rescue, charged and
  /// rescheduled like a retryable failure (or dead-lettered on its last
  /// attempt).
  deadline_exceeded,
  /// The handler asked to run again after `delay_ms`: counts as a failed
  /// attempt (dead-lettered on the last one), no backoff.
  retry_after,
  /// The handler asked to run again after `delay_ms` without it counting
  /// as an attempt. Fires no event.
  snoozed,
  /// The handler cancelled the job: state `cancelled`, `message` the reason.
  cancelled,
  /// The handler parked the job until an external callback resolves it or
  /// `delay_ms` passes: state `waiting_external` with a fresh callback_id.
  waiting_callback,
};

/// Renders an outcome kind for logs.
const char* to_string(outcome_kind k);

/// The result of one run of one job.
struct job_outcome {
  int64_t job_id = 0;
  outcome_kind kind = outcome_kind::completed;
  /// The failure message recorded as `last_error_message` (the reason for
  /// a cancel); empty on success.
  std::string message;
  /// retry_after / snoozed: the delay; waiting_callback: the timeout.
  int64_t delay_ms = 0;
  /// How long the handler ran.
  int64_t duration_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_outcome& x) {
  return f(caf::meta::type_name("job_outcome"), x.job_id, x.kind, x.message,
           x.delay_ms, x.duration_ms);
}

/// Why maintenance rescued a running job.
enum class rescue_reason : uint8_t {
  /// Its worker stopped refreshing the lease for the reclaim window.
  stale_heartbeat,
  /// The run passed its deadline and its worker did not end it.
  deadline_exceeded,
  /// The job waited for a callback past its timeout.
  expired_callback,
};

/// Renders a rescue reason for logs.
const char* to_string(rescue_reason r);

/// A job that a rescue pass charged and rescheduled or dead-lettered.
struct rescued_job {
  int64_t id = 0;
  std::string kind;
  rescue_reason reason = rescue_reason::stale_heartbeat;
  /// It was its last attempt: moved to the dead letter queue.
  bool dead_lettered = false;
  /// What was recorded as last_error_message.
  std::string message;
  /// The committed row (the dead letter row when dead-lettered), as JSON.
  std::string job_json;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rescued_job& x) {
  return f(caf::meta::type_name("rescued_job"), x.id, x.kind, x.reason,
           x.dead_lettered, x.message, x.job_json);
}

/// The points in a job's life that hooks observe.
enum class event_type : uint8_t {
  /// The claim committed; the handler is about to run.
  started,
  /// The job parked waiting for an external callback.
  waiting_for_callback,
  /// The job completed (duration zero when a callback completed it).
  completed,
  /// The attempt failed (or asked to retry) and the job will run again.
  retried,
  /// The job ran out of attempts or failed terminally: dead-lettered.
  exhausted,
  /// The job was cancelled.
  cancelled,
  /// Maintenance rescued it (stale heartbeat, deadline, expired callback).
  rescued,
};

/// Renders an event type for logs ("completed", ...).
const char* to_string(event_type t);

/// A committed transition, on its way to the hooks of the job's kind.
struct job_event {
  event_type type = event_type::started;
  std::string kind;
  /// The committed job row as a JSON object (keys = column names).
  std::string job_json;
  /// completed: how long the handler ran (0 for a callback completion).
  int64_t duration_ms = 0;
  /// retried / exhausted: the error; cancelled: the reason.
  std::string message;
  /// rescued: why.
  rescue_reason reason = rescue_reason::stale_heartbeat;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_event& x) {
  return f(caf::meta::type_name("job_event"), x.type, x.kind, x.job_json,
           x.duration_ms, x.message, x.reason);
}

/// What storage did with an outcome.
enum class finish_result : uint8_t {
  /// The transition committed.
  applied,
  /// The row was no longer running under this worker (released, reclaimed
  /// or deleted meanwhile): nothing was written.
  stale,
};

} // namespace aw
