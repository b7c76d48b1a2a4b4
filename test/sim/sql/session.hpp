#pragma once
// One session of a schedule: a thread that runs the steps the scheduler
// hands it, one at a time, on connections of its own. The scheduler
// releases a step and waits until it is done or blocked on a lock
// (scheduler.hpp); a step's bookkeeping runs back on the scheduler's
// thread (its continuation), so the schedule's state has one owner.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace aw::sim::sql {

/// What a step leaves for the scheduler's thread: its bookkeeping.
using continuation = std::function<void()>;

/// A step: runs on the session's thread, returns its continuation.
using step = std::function<continuation()>;

/// A thread that runs steps; see the file comment.
class session {
public:
  explicit session(std::string name);
  ~session();

  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// The session's name, for traces ("w1", "e0").
  const std::string& name() const {
    return name_;
  }

  /// Starts `s` on the session's thread. The session must be idle.
  void start(step s);

  /// Waits up to `us` microseconds for the running step; returns its
  /// continuation once it finished.
  std::optional<continuation> wait(int us);

  /// When the last step finished on the session's thread (its commit or
  /// failure came back): the order in which the scheduler runs the
  /// continuations of steps that were in flight together.
  std::chrono::steady_clock::time_point finished_at();
  /// When the last step was started.
  std::chrono::steady_clock::time_point started_at();

  /// Whether a step runs (or waits on a lock).
  bool busy() const {
    return busy_;
  }

  /// The server process the running step talks to (0: none yet), set by
  /// the step itself with set_pid() before each statement.
  int pid() const {
    return pid_;
  }
  void set_pid(int pid) {
    pid_ = pid;
  }

private:
  void loop();

  std::string name_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::optional<step> todo_;
  std::optional<continuation> done_;
  std::chrono::steady_clock::time_point finished_at_{};
  std::chrono::steady_clock::time_point started_at_{};
  bool stop_ = false;
  std::atomic<bool> busy_{false};
  std::atomic<int> pid_{0};
  std::thread thread_;
};

} // namespace aw::sim::sql
