#include "actor_worker/actors/maintenance.hpp"

#include <spdlog/spdlog.h>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw {

maintenance_actor::behavior_type
maintenance_behavior(maintenance_pointer self, storage_actor store,
                     std::chrono::milliseconds interval) {
  self->state.store = std::move(store);
  self->state.interval = interval;
  self->send(self, tick_atom::value);
  return {
    [self](tick_atom) {
      auto& st = self->state;
      self->request(st.store, caf::infinite, cleanup_atom::value)
        .then(
          [self](int64_t deleted) {
            auto& st = self->state;
            st.deleted += deleted;
            if (deleted > 0)
              spdlog::info("maintenance: deleted {} finished job(s) past "
                           "their retention",
                           deleted);
            if (deleted >= defaults::cleanup_batch) {
              self->send(self, tick_atom::value); // more expired: go on
              return;
            }
            // The round is over: vacuum the small lane tables whose dead
            // tuples passed their bound, then wait for the next one.
            self->request(st.store, caf::infinite, vacuum_atom::value)
              .then(
                [self](const std::vector<std::string>& tables) {
                  if (!tables.empty())
                    spdlog::debug("maintenance: vacuumed {} table(s)",
                                  tables.size());
                  self->delayed_send(self, self->state.interval,
                                     tick_atom::value);
                },
                [self](caf::error&) {
                  self->delayed_send(self, self->state.interval,
                                     tick_atom::value);
                });
          },
          [self](caf::error&) {
            // storage already logged it at ERROR; try again next round.
            self->delayed_send(self, self->state.interval, tick_atom::value);
          });
    },
  };
}

} // namespace aw
