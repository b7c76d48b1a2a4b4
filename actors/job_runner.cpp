#include "actors/job_runner.hpp"

#include "actors/blocking_pool.hpp"
#include "app/registry.hpp"

namespace aw {

registry_runner::registry_runner(std::shared_ptr<const registry> reg,
                                 size_t max_blocking_threads)
  : reg_(std::move(reg)),
    pool_(std::make_shared<blocking_pool>(max_blocking_threads)),
    runs_(std::make_shared<blocking_runs>()) {
  // nop
}

registry_runner::~registry_runner() = default;

std::optional<job_outcome> registry_runner::start(claimed_job job,
                                                  const run_context& ctx,
                                                  completion done) {
  switch (reg_->dispatch_of(job.kind)) {
    case registry::dispatch::inline_sync:
      return reg_->run(job, ctx.cancel);
    case registry::dispatch::async: {
      async_context actx;
      actx.cancel = ctx.cancel;
      if (ctx.timers)
        actx.timer = [timers = ctx.timers, run = ctx.run](
                       std::chrono::milliseconds delay,
                       std::function<void()> fn) {
          timers->after(run, delay, std::move(fn));
        };
      reg_->start(job, std::move(actx), std::move(done));
      return std::nullopt;
    }
    case registry::dispatch::blocking:
      break;
  }
  {
    std::lock_guard<std::mutex> guard{runs_->mtx};
    runs_->running.insert(job.id);
  }
  pool_->submit([reg = reg_, pool = std::weak_ptr<blocking_pool>{pool_},
                 runs = runs_, job = std::move(job), cancel = ctx.cancel,
                 done = std::move(done)] {
    done(reg->run(job, cancel));
    std::lock_guard<std::mutex> guard{runs->mtx};
    runs->running.erase(job.id);
    if (runs->abandoned.erase(job.id) > 0)
      if (auto p = pool.lock())
        p->release_abandoned();
  });
  return std::nullopt;
}

void registry_runner::abandoned(int64_t id) {
  // Only a blocking handler holds a thread; an asynchronous one holds none.
  std::lock_guard<std::mutex> guard{runs_->mtx};
  if (runs_->running.count(id) > 0 && runs_->abandoned.insert(id).second)
    pool_->abandon();
}

size_t registry_runner::blocking_threads() const {
  return pool_->threads();
}

} // namespace aw
