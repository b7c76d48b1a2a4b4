#include "session.hpp"

#include <chrono>
#include <exception>

namespace aw::sim::sql {

session::session(std::string name)
  : name_(std::move(name)), thread_([this] { loop(); }) {
  // nop
}

session::~session() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void session::start(step s) {
  std::lock_guard<std::mutex> guard{mtx_};
  busy_ = true;
  todo_ = std::move(s);
  started_at_ = std::chrono::steady_clock::now();
  done_.reset();
  cv_.notify_all();
}

std::optional<continuation> session::wait(int us) {
  std::unique_lock<std::mutex> guard{mtx_};
  cv_.wait_for(guard, std::chrono::microseconds{us},
               [this] { return done_.has_value(); });
  if (!done_)
    return std::nullopt;
  auto out = std::move(done_);
  done_.reset();
  busy_ = false;
  return out;
}

std::chrono::steady_clock::time_point session::finished_at() {
  std::lock_guard<std::mutex> guard{mtx_};
  return finished_at_;
}

std::chrono::steady_clock::time_point session::started_at() {
  std::lock_guard<std::mutex> guard{mtx_};
  return started_at_;
}

void session::loop() {
  for (;;) {
    step s;
    {
      std::unique_lock<std::mutex> guard{mtx_};
      cv_.wait(guard, [this] { return stop_ || todo_.has_value(); });
      if (stop_ && !todo_)
        return;
      s = std::move(*todo_);
      todo_.reset();
    }
    continuation c;
    try {
      c = s();
    } catch (const std::exception& e) {
      // Steps catch what they expect; anything else is the harness's own
      // failure, reported by the scheduler.
      std::string what = e.what();
      c = [what] { throw std::runtime_error("step threw: " + what); };
    }
    {
      std::lock_guard<std::mutex> guard{mtx_};
      done_ = std::move(c);
      finished_at_ = std::chrono::steady_clock::now();
    }
    cv_.notify_all();
  }
}

} // namespace aw::sim::sql
