#include "actors/executor.hpp"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "messages/error.hpp"

namespace aw {

executor_actor::behavior_type
executor_behavior(executor_actor::pointer self, claimed_job job,
                  std::shared_ptr<job_dispatcher> dispatcher,
                  storage_actor completer, poller_actor poller) {
  auto job_id = job.id;
  auto me = caf::actor_cast<executor_actor>(self);
  dispatcher->dispatch(std::move(job), [me](job_outcome outcome) {
    caf::anon_send(me, outcome_atom::value, std::move(outcome));
  });
  return {
    [=](outcome_atom, job_outcome& outcome) {
      auto kind = outcome.kind;
      if (kind == outcome_kind::completed)
        spdlog::debug("job {} completed", job_id);
      else
        spdlog::warn("job {} failed ({}): {}", job_id, to_string(kind),
                     outcome.message);
      self->request(completer, caf::infinite, finish_atom::value,
                    std::move(outcome))
        .then(
          [=](finish_result result) {
            self->send(poller, done_atom::value, job_id, kind, result);
            self->quit();
          },
          [=](caf::error& err) {
            // Storage never gives up on an outcome; this means it is gone.
            // The job stays running in the database until reclaimed.
            spdlog::error("job {}: outcome not recorded: {}", job_id,
                          render(err));
            self->send(poller, done_atom::value, job_id, kind,
                       finish_result::stale);
            self->quit();
          });
    },
  };
}

} // namespace aw
