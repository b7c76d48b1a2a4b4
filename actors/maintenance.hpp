#pragma once
// Maintenance: every maintenance_interval it deletes completed and
// cancelled rows past their retention, in batches (a full batch goes again
// at once), then vacuums the queue tables whose dead tuples passed their
// bound (config/defaults.hpp): keeping the hot tables healthy is the
// runtime's job, not the operator's. It works over a storage actor (a
// connection) of its own, so a long vacuum never delays claims or
// heartbeats.

#include <chrono>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "messages/actors.hpp"

namespace aw {

struct maintenance_state {
  static inline const char* name = "maintenance";
  storage_actor store;
  std::chrono::milliseconds interval{};
  int64_t deleted = 0;
};

using maintenance_pointer
  = maintenance_actor::stateful_pointer<maintenance_state>;

maintenance_actor::behavior_type
maintenance_behavior(maintenance_pointer self, storage_actor store,
                     std::chrono::milliseconds interval);

} // namespace aw
