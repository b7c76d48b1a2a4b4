#pragma once
// Maintenance: every maintenance_interval it deletes completed and
// cancelled rows past their retention, in batches (a full batch goes again
// at once), then vacuums the small lane tables (claim_batches,
// batch_completions, claim_cursors) whose dead tuples passed their bound
// (config/defaults.hpp): keeping the hot tables healthy is the runtime's
// job, not the operator's. job_rows is left to autovacuum: claims never
// read its dead tuples (lanes are read from their cursor on), and
// vacuuming a table of millions of rows every few seconds would cost more
// than it saves. It works over a storage actor (a connection) of its own,
// so a vacuum never delays claims or heartbeats.

#include <chrono>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/messages/actors.hpp"

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
