#include "actor_worker/actors/maintenance.hpp"

#include <spdlog/spdlog.h>

#include "actor_worker/actors/job_log.hpp"

#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"

namespace aw {

namespace {

void next_cleanup(maintenance_pointer self) {
  self->delayed_send(self, self->state.cfg.cleanup_interval,
                     cleanup_atom::value);
}

void next_rescue(maintenance_pointer self) {
  self->delayed_send(self, self->state.cfg.rescue_interval,
                     rescue_atom::value);
}

void cleanup(maintenance_pointer self) {
  auto& st = self->state;
  self->request(st.cfg.store, caf::infinite, cleanup_atom::value)
    .then(
      [self](int64_t deleted) {
        auto& st = self->state;
        st.deleted += deleted;
        if (deleted > 0)
          spdlog::info("maintenance: deleted {} finished job(s) and dead "
                       "letter(s) past their retention",
                       deleted);
        if (deleted >= defaults::cleanup_batch) {
          self->send(self, cleanup_atom::value); // more expired: go on
          return;
        }
        // The round is over: the ring's retention and the small tables'
        // vacuum, then wait for the next one.
        self->request(st.cfg.store, caf::infinite, vacuum_atom::value)
          .then(
            [self](const std::vector<std::string>& done) {
              for (auto& line : done)
                if (line.rfind("vacuumed ", 0) == 0)
                  spdlog::debug("maintenance: {}", line);
                else
                  spdlog::info("maintenance: {}", line);
              next_cleanup(self);
            },
            [self](caf::error&) { next_cleanup(self); });
      },
      [self](caf::error&) {
        // storage already logged it at ERROR; try again next round.
        next_cleanup(self);
      });
}

void rescue(maintenance_pointer self) {
  // No timeout: the next rescue waits for this one's reply, so a hung
  // connection never collects a queue of rescues.
  self->request(self->state.cfg.store, caf::infinite, rescue_atom::value)
    .then(
      [self](const std::vector<rescued_job>& rescued) {
        for (auto& r : rescued) {
          auto kind = printable(r.kind);
          auto queue = printable(r.queue);
          log_job(spdlog::level::warn, job_ref{r.id, kind, queue, 0},
                  "rescued job {} (kind '{}', queue '{}', {}){}: {}", r.id,
                  kind, queue, to_string(r.reason),
                  r.dead_lettered ? ", moved to the dead letter queue" : "",
                  printable(r.message));
        }
        next_rescue(self);
      },
      [self](caf::error&) {
        // storage already logged it at ERROR; try again next interval.
        next_rescue(self);
      });
}

void next_sample(maintenance_pointer self) {
  self->delayed_send(self, self->state.cfg.sample_interval,
                     sample_atom::value);
}

void sample(maintenance_pointer self) {
  // Like rescues: the next sample waits for this one's reply.
  self->request(self->state.cfg.store, caf::infinite, sample_atom::value)
    .then([self](int64_t) { next_sample(self); },
          [self](caf::error&) { next_sample(self); });
}

} // namespace

maintenance_internal::behavior_type
maintenance_behavior(maintenance_pointer self, maintenance_config cfg) {
  self->state.cfg = std::move(cfg);
  // Cleanup and the first rescue start at once: a leader that took over
  // from a killed one did so when the old lease ran out, which is about
  // when the old leader's job leases do, so its jobs run again within the
  // reclaim window plus one interval.
  self->send(self, cleanup_atom::value);
  self->send(self, rescue_atom::value);
  if (self->state.cfg.sample_interval.count() > 0)
    self->send(self, sample_atom::value);
  if (!self->state.cfg.periodic.schedules.empty())
    self->spawn<caf::linked>(periodic_behavior, self->state.cfg.periodic);
  return {
    [self](cleanup_atom) { cleanup(self); },
    [self](rescue_atom) { rescue(self); },
    [self](sample_atom) { sample(self); },
  };
}

} // namespace aw
