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
  event_type type = event_type::started;
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

  int64_t job_id() const {
    return job.value(job.contains("original_job_id") ? "original_job_id" : "id",
                     int64_t{0});
  }

  /// Times the job was started.
  int attempt() const {
    return job.value("attempt", 0);
  }
};

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
  return out;
}

/// An event with the job's args parsed into `Args`.
template <class Args>
struct typed_event : event {
  Args args;
};

} // namespace aw
