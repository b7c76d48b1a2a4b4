#include "actor_worker/app/blocking_pool.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace aw {

// Counts, all under the mutex: `alive` threads exist, `busy` run a task,
// `sleeping` wait without a wake-up token; the rest are awake and will look
// at the queue before they sleep ("searching"). Waking a thread costs a
// futex call and a context switch, more than many tasks, so a task only
// wakes (or starts) a thread when the queue holds more tasks than there are
// searching threads to take them.
struct blocking_pool::shared {
  std::mutex mtx;
  std::condition_variable cv;
  /// Signalled when a task returns (stop() waits on it).
  std::condition_variable returned;
  std::deque<std::function<void()>> queue;
  size_t max_threads = 1;
  size_t abandoned = 0;
  std::chrono::milliseconds idle_timeout{0};
  size_t alive = 0;
  size_t busy = 0;
  size_t sleeping = 0;
  /// Wake-ups sent and not yet taken.
  size_t tokens = 0;
  bool stopping = false;

  size_t searching() const {
    return alive - busy - sleeping;
  }

  /// Called with the lock held.
  void wake_or_start(const std::shared_ptr<shared>& self) {
    if (queue.size() <= searching())
      return;
    if (sleeping > 0) {
      --sleeping;
      ++tokens;
      cv.notify_one();
    } else if (alive < max_threads + abandoned) {
      ++alive;
      std::thread([s = self] { s->work(s); }).detach();
    }
  }

  void work(const std::shared_ptr<shared>& self) {
    std::unique_lock<std::mutex> guard{mtx};
    for (;;) {
      while (queue.empty()) {
        if (stopping) {
          --alive;
          return;
        }
        ++sleeping;
        bool woken = cv.wait_for(guard, idle_timeout, [this] {
          return tokens > 0 || stopping;
        });
        if (tokens > 0) {
          --tokens; // the waker already counted us as searching
        } else {
          --sleeping;
          if (!woken && !stopping) {
            --alive; // idle long enough: give the thread back
            return;
          }
        }
      }
      auto task = std::move(queue.front());
      queue.pop_front();
      ++busy;
      wake_or_start(self);
      guard.unlock();
      task();
      task = nullptr; // destroy captures without the lock held
      guard.lock();
      --busy;
      returned.notify_all();
    }
  }
};

blocking_pool::blocking_pool(size_t max_threads,
                             std::chrono::milliseconds idle_timeout)
  : shared_(std::make_shared<shared>()) {
  shared_->max_threads = std::max<size_t>(max_threads, 1);
  shared_->idle_timeout = idle_timeout;
}

blocking_pool::~blocking_pool() {
  stop(std::chrono::milliseconds{0});
}

void blocking_pool::submit(std::function<void()> task) {
  std::lock_guard<std::mutex> guard{shared_->mtx};
  if (shared_->stopping)
    return;
  shared_->queue.push_back(std::move(task));
  shared_->wake_or_start(shared_);
}

void blocking_pool::abandon() {
  std::lock_guard<std::mutex> guard{shared_->mtx};
  ++shared_->abandoned;
  shared_->wake_or_start(shared_);
}

void blocking_pool::release_abandoned() {
  std::lock_guard<std::mutex> guard{shared_->mtx};
  if (shared_->abandoned > 0)
    --shared_->abandoned;
}

size_t blocking_pool::stop(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> guard{shared_->mtx};
  shared_->stopping = true;
  shared_->queue.clear();
  shared_->cv.notify_all();
  shared_->returned.wait_for(guard, wait, [this] { return shared_->busy == 0; });
  return shared_->busy;
}

} // namespace aw
