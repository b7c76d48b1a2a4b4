#pragma once
// A bounded pool of threads for work that may block (handlers not declared
// non-blocking). Threads start on demand, up to the bound, and exit after
// being idle for a while: a node configured for 5000 concurrent jobs holds
// no thread until work arrives. A task is handed to a thread that is awake
// and looking for work when there is one; a sleeping thread is woken, or a
// new one started, only when none is.

#include <chrono>
#include <functional>
#include <memory>

#include "actor_worker/config/defaults.hpp"

namespace aw {

/// A bounded pool of threads for handlers that may block: threads start on demand up to the bound and exit after being idle (defaults::blocking_idle_timeout).
class blocking_pool {
public:
  /// At most `max_threads` threads (at least 1); one idle for
  /// `idle_timeout` exits.
  explicit blocking_pool(size_t max_threads,
                         std::chrono::milliseconds idle_timeout
                         = defaults::blocking_idle_timeout);

  /// Stops taking work. Tasks queued but not started are dropped (their
  /// jobs were released by the drain); a task still running finishes on its
  /// own thread, which then exits: shutdown never waits for a handler that
  /// ignores it.
  ~blocking_pool();

  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// Runs `task` on a pool thread, now or when one is free.
  void submit(std::function<void()> task);

  /// A running task will not return in time (a handler that ignored its
  /// deadline): the pool may start one more thread until it does, so the
  /// work behind it still gets threads. Call release_abandoned() when that
  /// task returns.
  void abandon();
  /// The abandoned task counted by abandon() returned: the extra thread it allowed is no longer needed.
  void release_abandoned();

  /// Stops taking work and drops queued tasks, then waits up to `wait` for
  /// the running ones to return. Returns how many still run (they finish
  /// on their detached threads, which then exit).
  size_t stop(std::chrono::milliseconds wait);

private:
  struct shared;
  std::shared_ptr<shared> shared_;
};

} // namespace aw
