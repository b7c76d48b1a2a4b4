#include "actors/blocking_pool.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>

#include "app/registry.hpp"

namespace aw {

// Waking a sleeping thread costs a futex call and a context switch, more
// than a no-op job. So a thread is woken only when no awake thread is free
// to take the job ("searching"); a thread that takes a job while more wait
// and nobody else searches wakes one more first, so blocking handlers never
// strand queued jobs. Under a burst of short jobs a couple of threads drain
// the queue; under blocking jobs every queued job still gets a thread.
struct blocking_pool::shared {
  struct item {
    claimed_job job;
    cancellation_token cancel;
    completion done;
  };

  std::shared_ptr<const registry> reg;
  std::mutex mtx;
  std::condition_variable cv;
  std::deque<item> queue;
  bool stopping = false;
  /// Awake and not in a handler: will look at the queue before sleeping.
  size_t searching = 0;
  /// Waiting on the condition variable without a wake-up token.
  size_t sleeping = 0;
  /// Wake-ups sent and not yet taken.
  size_t tokens = 0;

  /// Called with the lock held.
  void wake_one_if_needed() {
    if (!queue.empty() && searching == 0 && sleeping > 0) {
      --sleeping;
      ++searching;
      ++tokens;
      cv.notify_one();
    }
  }

  void work() {
    std::unique_lock<std::mutex> guard{mtx};
    for (;;) {
      while (queue.empty()) {
        if (stopping)
          return;
        --searching;
        ++sleeping;
        cv.wait(guard, [this] { return tokens > 0 || stopping; });
        if (tokens > 0) {
          --tokens; // the waker already counted us as searching
        } else {
          --sleeping;
          ++searching;
        }
      }
      if (stopping)
        return;
      auto next = std::move(queue.front());
      queue.pop_front();
      --searching;
      wake_one_if_needed();
      guard.unlock();
      next.done(reg->run(next.job, next.cancel));
      guard.lock();
      ++searching;
    }
  }
};

blocking_pool::blocking_pool(std::shared_ptr<const registry> reg,
                             size_t threads)
  : shared_(std::make_shared<shared>()), threads_(std::max<size_t>(threads, 1)) {
  shared_->reg = std::move(reg);
  shared_->searching = threads_;
  for (size_t i = 0; i < threads_; ++i)
    std::thread([s = shared_] { s->work(); }).detach();
}

blocking_pool::~blocking_pool() {
  {
    std::lock_guard<std::mutex> guard{shared_->mtx};
    shared_->stopping = true;
    shared_->queue.clear();
  }
  shared_->cv.notify_all();
}

void blocking_pool::dispatch(claimed_job job, cancellation_token cancel,
                             completion done) {
  std::lock_guard<std::mutex> guard{shared_->mtx};
  shared_->queue.push_back({std::move(job), std::move(cancel), std::move(done)});
  shared_->wake_one_if_needed();
}

} // namespace aw
