#pragma once
// Exponential backoff for loop errors: 1 s, 2 s, 4 s ... capped at 30 s,
// back to 1 s after the next success (spec: Transient Error Resilience).

#include <algorithm>
#include <chrono>

#include "actor_worker/config/defaults.hpp"

namespace aw {

/// Transient-error backoff: 1 s doubling to 30 s by default, reset after the next success (spec: Transient Error Resilience).
class backoff {
public:
  /// Delays are milliseconds.
  using duration = std::chrono::milliseconds;

  /// Starts at `initial`, doubles on each failure, never past `max`.
  backoff(duration initial = defaults::backoff_initial,
          duration max = defaults::backoff_max)
    : initial_(initial), max_(max), next_(initial) {
    // nop
  }

  /// The delay before the next retry; doubles the one after, up to max.
  duration next() {
    auto d = next_;
    next_ = std::min(next_ * 2, max_);
    ++failures_;
    return d;
  }

  /// A success: the next failure waits the initial delay again.
  void reset() {
    next_ = initial_;
    failures_ = 0;
  }

  /// Failures since the last success.
  int failures() const {
    return failures_;
  }

private:
  duration initial_;
  duration max_;
  duration next_;
  int failures_ = 0;
};

} // namespace aw
