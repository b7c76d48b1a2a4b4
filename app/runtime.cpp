#include "app/runtime.hpp"

#include <random>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/exit_reason.hpp>
#include <spdlog/spdlog.h>

#include "actors/blocking_pool.hpp"
#include "actors/supervisor.hpp"
#include "app/registry.hpp"
#include "messages/error.hpp"

namespace aw {

std::string runtime::make_worker_id(const std::string& node) {
  std::random_device rd;
  char suffix[9];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return node + ":" + std::to_string(::getpid()) + ":" + suffix;
}

runtime::runtime(caf::actor_system& sys, runtime_config cfg,
                 std::shared_ptr<const registry> reg)
  : sys_(sys) {
  cfg.validate();
  worker_id_ = make_worker_id(cfg.worker.node);
  size_t threads = 0;
  for (auto& q : cfg.queues)
    threads += static_cast<size_t>(q.concurrency);
  pool_ = std::make_shared<blocking_pool>(std::move(reg), threads);
  supervisor_config sc;
  sc.config = std::move(cfg);
  sc.worker_id = worker_id_;
  sc.dispatcher = pool_;
  auto sup = sys.spawn(supervisor_behavior, std::move(sc));
  auto ended = std::make_shared<std::promise<caf::error>>();
  ended_ = ended->get_future().share();
  sup->attach_functor([ended](const caf::error& reason) {
    if (reason == caf::exit_reason::user_shutdown
        || reason == caf::exit_reason::normal)
      ended->set_value(caf::error{});
    else
      ended->set_value(reason);
  });
  supervisor_ = std::make_unique<caf::actor>(caf::actor_cast<caf::actor>(sup));
}

runtime::~runtime() {
  stop();
}

int64_t runtime::stop() {
  if (stopped_)
    return released_;
  stopped_ = true;
  if (ended_.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
    caf::scoped_actor self{sys_};
    auto sup = caf::actor_cast<supervisor_actor>(*supervisor_);
    self->request(sup, caf::infinite, stop_atom::value)
      .receive([&](int64_t released) { released_ = released; },
               [&](caf::error& err) {
                 // It ended while we asked (a fatal error): nothing to drain.
                 spdlog::debug("stop: {}", render(err));
               });
  }
  ended_.wait();
  // Handlers still running past the drain hold pool threads; the pool joins
  // them when the last reference (ours or an executor's) goes away.
  pool_.reset();
  return released_;
}

caf::error runtime::wait() {
  return ended_.get();
}

std::optional<caf::error>
runtime::wait_for(std::chrono::milliseconds timeout) {
  if (ended_.wait_for(timeout) != std::future_status::ready)
    return std::nullopt;
  return ended_.get();
}

void runtime::wake(const std::string& queue) {
  caf::anon_send(caf::actor_cast<supervisor_actor>(*supervisor_),
                 wake_atom::value, queue);
}

} // namespace aw
