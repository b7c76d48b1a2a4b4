#include "actors/blocking_pool.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>

#include "app/registry.hpp"

namespace aw {

struct blocking_pool::shared {
  std::shared_ptr<const registry> reg;
  std::mutex mtx;
  std::condition_variable cv;
  struct item {
    claimed_job job;
    cancellation_token cancel;
    completion done;
  };
  std::deque<item> queue;
  bool stopping = false;

  void work() {
    for (;;) {
      item next;
      {
        std::unique_lock<std::mutex> guard{mtx};
        cv.wait(guard, [this] { return stopping || !queue.empty(); });
        if (stopping)
          return;
        next = std::move(queue.front());
        queue.pop_front();
      }
      next.done(reg->run(next.job, next.cancel));
    }
  }
};

blocking_pool::blocking_pool(std::shared_ptr<const registry> reg,
                             size_t threads)
  : shared_(std::make_shared<shared>()), threads_(std::max<size_t>(threads, 1)) {
  shared_->reg = std::move(reg);
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
  {
    std::lock_guard<std::mutex> guard{shared_->mtx};
    shared_->queue.push_back({std::move(job), std::move(cancel), std::move(done)});
  }
  shared_->cv.notify_one();
}

} // namespace aw
