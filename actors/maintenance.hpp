#pragma once
// Maintenance: deletes completed and cancelled rows past their retention,
// every maintenance_interval, in batches (a full batch goes again at once).
// The lease keeper's rescues join it in a later issue.

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
