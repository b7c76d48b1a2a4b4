#pragma once
// What the worker logs, for tests that check a message was (or was not)
// written.

#include <algorithm>
#include <memory>
#include <string>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

namespace aw::test {

/// Copies what the default logger writes into a ring buffer while alive.
/// Create and destroy it while no node runs (sinks are not swapped under a
/// logging thread).
class log_capture {
public:
  log_capture()
    : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }

  ~log_capture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }

  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  /// Whether a captured line contains `text`.
  bool has(const std::string& text) {
    for (auto& line : sink_->last_formatted())
      if (line.find(text) != std::string::npos)
        return true;
    return false;
  }

private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

} // namespace aw::test
