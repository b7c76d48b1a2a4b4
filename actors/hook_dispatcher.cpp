#include "actor_worker/actors/hook_dispatcher.hpp"

#include <spdlog/spdlog.h>

#include "actor_worker/messages/job_handlers.hpp"

namespace aw {

hook_dispatcher_actor::behavior_type
hook_dispatcher_behavior(hook_dispatcher_actor::pointer,
                         std::shared_ptr<const job_handlers> reg,
                         std::shared_ptr<observer> watcher) {
  return {
    [reg, watcher](const job_event& e) {
      try {
        auto ev = make_event(e);
        if (reg->has_hooks(ev.kind))
          if (auto failures = reg->run_hooks(ev); failures > 0 && watcher)
            watcher->hooks_failed(ev.kind, failures);
      } catch (const std::exception& ex) {
        spdlog::error("hooks: cannot dispatch a {} event: {}",
                      to_string(e.type), ex.what());
      }
    },
  };
}

} // namespace aw
