#pragma once
// Log lines about one job. In text they read as always ("job 42 (kind
// 'email', queue 'default', attempt 1) completed in 12 ms"); with
// `[log] format = "json"` (app/log_format.hpp) the same line also carries
// the job's id, kind, queue and attempt as fields of its object. The
// fields reach the formatter through a thread-local pointer that is set
// only while the line is written: spdlog formats on the calling thread.

#include <cstdint>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

namespace aw {

/// The job a log line is about.
struct job_ref {
  /// The job's id.
  int64_t id = 0;
  /// Its kind.
  std::string_view kind;
  /// Its queue.
  std::string_view queue;
  /// The run's attempt.
  int32_t attempt = 0;
};

/// The job of the line being written on this thread, or null.
const job_ref* current_job() noexcept;

/// Sets current_job() for its lifetime.
class job_log_scope {
public:
  /// Makes `job` the current job of this thread until the scope ends.
  explicit job_log_scope(const job_ref& job) noexcept;
  ~job_log_scope();
  job_log_scope(const job_log_scope&) = delete;
  job_log_scope& operator=(const job_log_scope&) = delete;

private:
  const job_ref* previous_;
};

/// Logs one line about `job` at `level` (the text is formatted only when
/// the level is on).
template <class... Args>
void log_job(spdlog::level::level_enum level, const job_ref& job,
             spdlog::format_string_t<Args...> format, Args&&... args) {
  if (!spdlog::should_log(level))
    return;
  job_log_scope scope{job};
  spdlog::log(level, format, std::forward<Args>(args)...);
}

} // namespace aw
