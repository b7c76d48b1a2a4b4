#include "actors/executor.hpp"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "config/config.hpp"
#include "messages/error.hpp"

namespace aw {

executor_actor::behavior_type
executor_behavior(executor_pointer self, claimed_job job,
                  std::shared_ptr<job_dispatcher> dispatcher,
                  storage_actor completer, poller_actor poller) {
  auto& st = self->state;
  st.job_id = job.id;
  st.deadline_ms = job.deadline_ms;
  // Whatever ends this actor (shutdown, a bug), the handler is told to stop.
  self->attach_functor([token = st.cancel] {
    token.cancel("the worker stopped this run");
  });
  if (job.deadline_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds{job.deadline_ms},
                       deadline_atom::value);
  auto me = caf::actor_cast<executor_actor>(self);
  auto started = std::chrono::steady_clock::now();
  dispatcher->dispatch(std::move(job), st.cancel,
                       [me, started](job_outcome outcome) {
                         outcome.duration_ms
                           = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - started)
                               .count();
                         caf::anon_send(me, outcome_atom::value,
                                        std::move(outcome));
                       });
  return {
    [self, completer, poller](outcome_atom, job_outcome& outcome) {
      auto& st = self->state;
      auto id = st.job_id;
      if (st.lost) {
        spdlog::warn("job {}: handler returned after the job stopped being "
                     "ours ({}); its outcome is not recorded",
                     id, st.cancel.reason());
        self->send(poller, done_atom::value, id, outcome.kind,
                   finish_result::stale);
        self->quit();
        return;
      }
      if (st.overran) {
        outcome.kind = outcome_kind::deadline_exceeded;
        outcome.message = "deadline exceeded: the run took longer than "
                          + format_duration(
                            std::chrono::milliseconds{st.deadline_ms});
      }
      auto kind = outcome.kind;
      switch (kind) {
        case outcome_kind::completed:
          spdlog::debug("job {} completed in {} ms", id, outcome.duration_ms);
          break;
        case outcome_kind::snoozed:
        case outcome_kind::waiting_callback:
          spdlog::info("job {}: {} ({} ms)", id, to_string(kind),
                       outcome.delay_ms);
          break;
        case outcome_kind::cancelled:
          spdlog::info("job {} cancelled: {}", id, outcome.message);
          break;
        default:
          spdlog::warn("job {} failed ({}): {}", id, to_string(kind),
                       outcome.message);
      }
      self->request(completer, caf::infinite, finish_atom::value,
                    std::move(outcome))
        .then(
          [self, poller, id, kind](finish_result result) {
            self->send(poller, done_atom::value, id, kind, result);
            self->quit();
          },
          [self, poller, id, kind](caf::error& err) {
            // Storage never gives up on an outcome; this means it is gone.
            // The job stays running in the database until reclaimed.
            spdlog::error("job {}: outcome not recorded: {}", id,
                          render(err));
            self->send(poller, done_atom::value, id, kind,
                       finish_result::stale);
            self->quit();
          });
    },
    [self](cancel_atom, const std::string& reason) {
      self->state.lost = true;
      self->state.cancel.cancel(reason);
    },
    [self](deadline_atom) {
      auto& st = self->state;
      st.overran = true;
      st.cancel.cancel("deadline of "
                       + format_duration(std::chrono::milliseconds{st.deadline_ms})
                       + " exceeded");
      spdlog::warn("job {}: deadline of {} exceeded, cancelling the run",
                   st.job_id,
                   format_duration(std::chrono::milliseconds{st.deadline_ms}));
    },
  };
}

} // namespace aw
