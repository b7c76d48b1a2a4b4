#pragma once
// What job_store's sources (storage/job_store*.cpp) share. Internal to
// aw_storage: not installed.

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/messages/job.hpp"
#include "actor_worker/storage/job_store.hpp"

namespace aw::storage {

/// A lease names a lane batch when its lowest bit is set
/// (actor_worker_batch_id), a row batch otherwise.
inline bool on_lane(int64_t lease) {
  return (lease & 1) != 0;
}

/// The follow-ups of one committed transition. A callable that throws
/// (anything) is reported as an error naming the trigger's kind, event and
/// job, so the failure recorded instead of the outcome says which
/// follow-up failed; a non-standard exception must not escape into the
/// storage actor either.
std::vector<enqueue_request> follow_ups_of(const follow_up_function& fn,
                                           const job_event& e);

/// True when `outcomes` are all completions of lane jobs nobody observes:
/// receipts alone, no events, no follow-ups.
bool lane_completions_only(const std::vector<job_outcome>& outcomes);

/// The runtime's statements by name: prepared on each connection, or sent
/// as text with their parameters (unnamed) behind a pooler.
const std::unordered_map<std::string_view, const char*>& statements();

template <class... Args>
pqxx::result job_store::run(pqxx::transaction_base& tx, const char* name,
                            Args&&... args) {
  if (opts_.prepared_statements)
    return tx.exec_prepared(name, std::forward<Args>(args)...);
  return tx.exec_params(statements().at(name), std::forward<Args>(args)...);
}

} // namespace aw::storage
