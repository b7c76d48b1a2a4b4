#pragma once
// Cooperative cancellation for handlers. The runtime cancels a job's token
// when its deadline passes, when its lease turns out to be lost (another
// worker reclaimed it, or it was released), or when the watchdog abandons
// it. Handlers that run long check it, or sleep through it.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace aw {

/// A run's cancellation: set on deadline, lost lease, `jobs cancel` or shutdown; copies share one state. Handlers poll cancelled() or register a callback; cancellation is cooperative.
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

  /// Calls `fn(reason)` when the token is cancelled (at once if it
  /// already is), on the thread that cancels it. For asynchronous handlers,
  /// which have no thread to sleep on. `fn` must not block.
  void on_cancel(std::function<void(const std::string&)> fn) const {
    std::unique_lock<std::mutex> guard{state_->mtx};
    if (!state_->cancelled) {
      state_->callbacks.push_back(std::move(fn));
      return;
    }
    auto why = state_->reason;
    guard.unlock();
    fn(why);
  }

  /// Cancels (first reason wins), wakes every sleeper and runs the
  /// on_cancel callbacks.
  void cancel(const std::string& why) const {
    std::vector<std::function<void(const std::string&)>> callbacks;
    {
      std::lock_guard<std::mutex> guard{state_->mtx};
      if (state_->cancelled)
        return;
      state_->cancelled = true;
      state_->reason = why;
      callbacks.swap(state_->callbacks);
    }
    state_->cv.notify_all();
    for (auto& fn : callbacks)
      fn(why);
  }

private:
  struct state {
    std::mutex mtx;
    std::condition_variable cv;
    bool cancelled = false;
    std::string reason;
    std::vector<std::function<void(const std::string&)>> callbacks;
  };
  std::shared_ptr<state> state_;
};

} // namespace aw
