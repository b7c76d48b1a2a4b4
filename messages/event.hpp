#pragma once
// What lifecycle hooks and follow-up callables receive: a committed
// transition of a job and the job's row after it.

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "actor_worker/messages/job.hpp"

namespace aw {

/// A committed transition. Hooks observe it after the commit, best effort;
/// follow-ups are computed from it inside the transaction.
struct event {
  /// Which transition was committed.
  event_type type = event_type::started;
  /// The job's kind.
  std::string kind;
  /// The committed row, keys = column names of `jobs` (of
  /// `dead_letter_jobs` for `exhausted`).
  nlohmann::json job;
  /// completed: how long the handler ran (zero for a callback completion).
  std::chrono::milliseconds duration{0};
  /// retried / exhausted: the error; cancelled: the reason.
  std::string message;
  /// rescued: why.
  rescue_reason reason = rescue_reason::stale_heartbeat;
  /// The attempt this event is about, counted as the retry limit counts
  /// them: 1 for the first run, and only failures move it on. For
  /// `retried`, `exhausted` and `rescued` it is the attempt that just
  /// failed (the row's error_count after the failure); for the others, the
  /// attempt that runs or ran (error_count + 1). Snoozes, shutdown releases
  /// and callback retries or resumes never count, so a job snoozed once
  /// and then failing reports attempt 1 while the row's `attempt` column,
  /// which counts every start, says 2.
  int attempt = 0;

  /// The job's id (from the committed row).
  int64_t job_id() const {
    return job.value(job.contains("original_job_id") ? "original_job_id" : "id",
                     int64_t{0});
  }
};

/// event::attempt of a committed transition of type `type` whose row is
/// `job`.
inline int attempt_of(event_type type, const nlohmann::json& job) {
  auto failures = job.is_object() ? job.value("error_count", 0) : 0;
  switch (type) {
    case event_type::retried:
    case event_type::exhausted:
    case event_type::rescued:
      return failures; // charged with this failure already
    default:
      return failures + 1;
  }
}

/// The public event of a transition message (parses the row).
inline event make_event(const job_event& e) {
  event out;
  out.type = e.type;
  out.job = e.job_json.empty() ? nlohmann::json::object()
                               : nlohmann::json::parse(e.job_json);
  out.kind = e.kind.empty() ? out.job.value("kind", std::string{}) : e.kind;
  out.duration = std::chrono::milliseconds{e.duration_ms};
  out.message = e.message;
  out.reason = e.reason;
  out.attempt = e.attempt > 0 ? e.attempt : attempt_of(out.type, out.job);
  return out;
}

/// An event with the job's args parsed into `Args`.
template <class Args>
struct typed_event : event {
  /// The job's args, parsed as `Args`.
  Args args;
};

} // namespace aw
