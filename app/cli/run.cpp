// `actor-worker run`.

#include "actor_worker/app/cli/cli.hpp"

#include <csignal>
#include <pthread.h>
#include <ctime>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/app/builtin_kinds.hpp"
#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "actor_worker/app/toml_kinds.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw::cli {

int run_worker(const runtime_config& cfg) {
  // Signals are taken synchronously by this thread only; block them before
  // CAF starts its threads so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto reg = std::make_shared<aw::registry>();
  // With the URL: also the test/diagnostic kind `record`.
  aw::register_builtin_kinds(*reg, cfg.database.url);
  // [kinds.NAME]: command and HTTP kinds (a built-in name is refused).
  aw::register_toml_kinds(*reg, cfg.kinds);

  caf::actor_system_config sys_cfg;
  // [scheduler]: CAF's default is at least 4 threads; handlers that block
  // run on the blocking pool, so the actors need no more than cores.
  aw::configure_actor_system(sys_cfg, cfg.scheduler);
  caf::actor_system sys{sys_cfg};
  std::string queues;
  for (auto& q : cfg.queues)
    queues += (queues.empty() ? "" : ", ") + q.name + " (concurrency "
              + std::to_string(q.concurrency) + ")";
  spdlog::info("starting: node {}, queues {}, kinds {}", cfg.worker.node,
               queues, nlohmann::json(reg->kinds()).dump());
  aw::runtime rt{sys, cfg, reg};
  timespec tick{0, 100'000'000};
  for (;;) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("received {}, shutting down gracefully",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      rt.stop();
      return exit_ok;
    }
    if (auto ended = rt.wait_for(std::chrono::milliseconds{0})) {
      if (*ended) {
        spdlog::critical("worker stopped: {}", aw::render(*ended));
        // A URL the server refuses for good is a configuration error.
        if (ended->category() == aw::error_category_atom
            && static_cast<aw::ec>(ended->code())
                 == aw::ec::database_misconfigured)
          return exit_usage;
        return exit_failure;
      }
      return exit_ok;
    }
  }
}

} // namespace aw::cli
