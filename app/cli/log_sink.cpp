// The binary's stderr sink: see log_sink.hpp.

#include "actor_worker/app/cli/log_sink.hpp"

#include <chrono>
#include <cstdio>
#include <mutex>

#include <unistd.h>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace aw::cli {

namespace {

/// Writes formatted lines into stderr's stdio buffer, made a full buffer;
/// flush() empties it.
class buffered_stderr_sink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }

  void flush_() override {
    std::fflush(stderr);
  }
};

} // namespace

void install_stderr_logger() {
  std::shared_ptr<spdlog::logger> logger;
  if (::isatty(STDERR_FILENO)) {
    logger = spdlog::stderr_color_mt("actor-worker");
  } else {
    // 64 KiB: a few hundred lines per write. stdio flushes it at exit.
    static char buffer[64 * 1024];
    std::setvbuf(stderr, buffer, _IOFBF, sizeof buffer);
    logger = std::make_shared<spdlog::logger>(
      "actor-worker", std::make_shared<buffered_stderr_sink>());
    logger->flush_on(spdlog::level::warn);
    spdlog::flush_every(std::chrono::seconds{1});
  }
  spdlog::set_default_logger(std::move(logger));
}

} // namespace aw::cli
