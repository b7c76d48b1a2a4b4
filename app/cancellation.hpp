#pragma once
// Cooperative cancellation for handlers. The runtime cancels a job's token
// when its deadline passes, when its lease turns out to be lost (another
// worker reclaimed it, or it was released), or when the watchdog abandons
// it. Handlers that run long check it, or sleep through it.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace aw {

class cancellation_token {
public:
  cancellation_token() : state_(std::make_shared<state>()) {
    // nop
  }

  /// True once cancelled.
  bool cancelled() const {
    std::lock_guard<std::mutex> guard{state_->mtx};
    return state_->cancelled;
  }

  /// Why it was cancelled ("" while not cancelled).
  std::string reason() const {
    std::lock_guard<std::mutex> guard{state_->mtx};
    return state_->reason;
  }

  /// Sleeps for `d` or until cancelled, whichever comes first. Returns true
  /// if the full time passed, false if cancelled.
  template <class Rep, class Period>
  bool sleep_for(std::chrono::duration<Rep, Period> d) const {
    std::unique_lock<std::mutex> guard{state_->mtx};
    return !state_->cv.wait_for(guard, d, [this] { return state_->cancelled; });
  }

  /// Cancels (first reason wins) and wakes every sleeper.
  void cancel(const std::string& why) const {
    {
      std::lock_guard<std::mutex> guard{state_->mtx};
      if (state_->cancelled)
        return;
      state_->cancelled = true;
      state_->reason = why;
    }
    state_->cv.notify_all();
  }

private:
  struct state {
    std::mutex mtx;
    std::condition_variable cv;
    bool cancelled = false;
    std::string reason;
  };
  std::shared_ptr<state> state_;
};

} // namespace aw
