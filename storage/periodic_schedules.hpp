#pragma once
// periodic_schedules (migrations/014_periodic.sql): the tick of a schedule
// enqueued exactly once, and the rows the scheduler and `actor-worker
// periodic` read.

#include <cstdint>
#include <vector>

#include "actor_worker/messages/periodic_schedule.hpp"

namespace pqxx {
class transaction_base;
}

namespace aw::storage {

/// In `tx`: takes `tick` of its schedule (the schedule's last_tick moves
/// forward to it, only while it is earlier) and enqueues its job, with
/// metadata {"periodic": name, "tick": "…Z"}. Returns the job's id, or 0
/// when another scheduler took this tick or a later one (nothing is
/// enqueued then). Exactly once across concurrent callers in READ
/// COMMITTED (PostgreSQL's default). Throws what enqueue() throws.
int64_t enqueue_periodic_tick(pqxx::transaction_base& tx,
                              const periodic_tick& tick);

/// Every row of periodic_schedules, by name.
std::vector<periodic_row> periodic_rows(pqxx::transaction_base& tx);

} // namespace aw::storage
