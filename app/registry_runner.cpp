#include "actor_worker/app/registry_runner.hpp"

#include <unordered_map>

#include "actor_worker/app/blocking_pool.hpp"
#include "actor_worker/app/registry.hpp"

namespace aw {

// Everything by which a handler reaches the actor system (its executor's
// completion callback and timer service) is held here and only used under
// the mutex while the gate is open. close() drops it all while the actor
// system is still alive, so a handler that finishes later finds nothing to
// call and nothing of the system to destroy.
struct registry_runner::gate {
  struct entry {
    completion done;
    std::weak_ptr<timer_service> timers;
    bool async = false;
  };
  std::mutex mtx;
  bool open = true;
  uint64_t next_key = 0;
  std::unordered_map<uint64_t, entry> pending;

  /// Registers a run; 0 when closed.
  uint64_t add(completion done, const std::shared_ptr<timer_service>& timers,
               bool async) {
    std::lock_guard<std::mutex> guard{mtx};
    if (!open)
      return 0;
    auto key = ++next_key;
    pending.emplace(key, entry{std::move(done), timers, async});
    return key;
  }

  /// Delivers the run's outcome, at most once, while open.
  void complete(uint64_t key, job_outcome out) {
    std::lock_guard<std::mutex> guard{mtx};
    auto i = pending.find(key);
    if (!open || i == pending.end())
      return;
    auto done = std::move(i->second.done);
    pending.erase(i);
    done(std::move(out));
  }

  /// The run holds a thread after all (it was added as asynchronous).
  void holds_thread(uint64_t key) {
    std::lock_guard<std::mutex> guard{mtx};
    auto i = pending.find(key);
    if (i != pending.end())
      i->second.async = false;
  }

  /// Arms a timer of the run's executor, while open and not completed.
  void after(uint64_t key, uint64_t run, std::chrono::milliseconds delay,
             std::function<void()> fn) {
    std::lock_guard<std::mutex> guard{mtx};
    auto i = pending.find(key);
    if (!open || i == pending.end())
      return;
    if (auto timers = i->second.timers.lock())
      timers->after(run, delay, std::move(fn));
  }

  /// Closes the gate; returns how many asynchronous runs had not ended.
  int64_t close() {
    std::lock_guard<std::mutex> guard{mtx};
    open = false;
    int64_t async = 0;
    for (auto& [key, e] : pending)
      async += e.async ? 1 : 0;
    pending.clear();
    return async;
  }
};

registry_runner::registry_runner(std::shared_ptr<const job_handlers> reg,
                                 size_t max_blocking_threads,
                                 transactional_run transactional,
                                 callback_registrar registrar,
                                 transactional_start start_tx)
  : reg_(std::move(reg)), transactional_(std::move(transactional)),
    registrar_(std::move(registrar)), start_tx_(std::move(start_tx)),
    pool_(std::make_shared<blocking_pool>(max_blocking_threads)),
    runs_(std::make_shared<blocking_runs>()),
    gate_(std::make_shared<gate>()) {
  // nop
}

registry_runner::~registry_runner() {
  gate_->close();
}

std::optional<job_outcome> registry_runner::start(claimed_job job,
                                                  const run_context& ctx,
                                                  completion done) {
  auto mode = reg_->dispatch_of(job.kind);
  if (mode == job_handlers::dispatch::inline_sync)
    return reg_->run(job, ctx.cancel);
  // (A transactional run that holds no thread counts as an asynchronous
  // one: when the runner stops, it has not ended until its group did.)
  bool threadless = mode == job_handlers::dispatch::transactional && start_tx_;
  auto key = gate_->add(std::move(done), ctx.timers,
                        mode == job_handlers::dispatch::async || threadless);
  if (key == 0)
    return std::nullopt; // stopped: the run goes nowhere
  if (threadless
      && start_tx_(job, ctx.cancel,
                   [pool = std::weak_ptr<blocking_pool>{pool_}](
                     std::function<void()> task) {
                     if (auto p = pool.lock())
                       p->submit(std::move(task));
                   },
                   [g = gate_, key](job_outcome out) {
                     g->complete(key, std::move(out));
                   }))
    return std::nullopt;
  if (threadless)
    gate_->holds_thread(key);
  if (mode == job_handlers::dispatch::async) {
    async_context actx;
    actx.cancel = ctx.cancel;
    if (ctx.timers)
      actx.timer = [g = gate_, key, run = ctx.run](
                     std::chrono::milliseconds delay,
                     std::function<void()> fn) {
        g->after(key, run, delay, std::move(fn));
      };
    auto timeout = reg_->callback_on_start(job.kind);
    if (!timeout) {
      reg_->start(job, std::move(actx),
                  [g = gate_, key](job_outcome out) {
                    g->complete(key, std::move(out));
                  });
      return std::nullopt;
    }
    // The kind hands its callback id on as it starts: registered first,
    // on a blocking thread (a round trip the executor must not wait for).
    actx.callback = callback_of(job, ctx.cancel);
    pool_->submit([reg = reg_, g = gate_, key, job = std::move(job),
                   actx = std::move(actx), timeout]() mutable {
      try {
        if (!actx.callback)
          throw std::logic_error("job kind '" + job.kind
                                 + "' registers its callback id before it "
                                   "starts, and this runner has no database "
                                   "to register it in");
        actx.callback->register_for(*timeout);
      } catch (...) {
        g->complete(key, outcome_of_exception(job.id, job.kind,
                                              std::current_exception()));
        return;
      }
      reg->start(job, std::move(actx), [g, key](job_outcome out) {
        g->complete(key, std::move(out));
      });
    });
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> guard{runs_->mtx};
    runs_->running.insert(job.id);
  }
  // (A transactional run holds a thread as a blocking one does, and its
  // connection only while its transaction is open.)
  auto run = mode == job_handlers::dispatch::transactional && transactional_
               ? transactional_
               : transactional_run{[reg = reg_,
                                    callback = callback_of(job, ctx.cancel)](
                                     const claimed_job& j,
                                     const cancellation_token& c) {
                   return reg->run(j, c, callback);
                 }};
  pool_->submit([run = std::move(run),
                 pool = std::weak_ptr<blocking_pool>{pool_}, runs = runs_,
                 g = gate_, key, job = std::move(job), cancel = ctx.cancel] {
    g->complete(key, run(job, cancel));
    std::lock_guard<std::mutex> guard{runs->mtx};
    runs->running.erase(job.id);
    if (runs->abandoned.erase(job.id) > 0)
      if (auto p = pool.lock())
        p->release_abandoned();
  });
  return std::nullopt;
}

std::shared_ptr<run_callback>
registry_runner::callback_of(const claimed_job& job,
                             const cancellation_token& cancel) const {
  if (!registrar_)
    return nullptr;
  return std::make_shared<run_callback>(
    [registrar = registrar_, job = registry::identity_of(job),
     cancel](std::chrono::milliseconds timeout) {
      auto id = registrar(job, timeout, cancel);
      if (!id)
        throw registry::stale_registration_error(job);
      return *id;
    });
}

void registry_runner::abandoned(int64_t id) {
  // Only a blocking handler holds a thread; an asynchronous one holds none.
  std::lock_guard<std::mutex> guard{runs_->mtx};
  if (runs_->running.count(id) > 0 && runs_->abandoned.insert(id).second)
    pool_->abandon();
}

int64_t registry_runner::stop(std::chrono::milliseconds wait) {
  auto async = gate_->close();
  return async + static_cast<int64_t>(pool_->stop(wait));
}

} // namespace aw
