#pragma once
// Milliseconds to seconds, written once: SQL's intervals, the dashboard's
// JSON and Prometheus take seconds, while the configuration keeps
// milliseconds.

#include <chrono>
#include <cstdint>

namespace aw {

/// `d` in seconds with its fraction (1500ms -> 1.5): for what takes
/// fractional seconds (`make_interval(secs => $1)`, JSON, histograms).
constexpr double fractional_seconds(std::chrono::milliseconds d) {
  return static_cast<double>(d.count()) / 1000.0;
}

/// The whole seconds in `d`, the fraction dropped (1999ms -> 1): for
/// texts and limits counted in whole seconds.
constexpr int64_t whole_seconds(std::chrono::milliseconds d) {
  return d.count() / 1000;
}

} // namespace aw
