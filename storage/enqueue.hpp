#pragma once
// Enqueue inside the caller's own transaction: the job becomes visible when
// the caller commits and vanishes if it rolls back. A due job wakes idle
// workers through the NOTIFY trigger, once per statement and queue, in the
// same transaction.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actor_worker/messages/enqueue_request.hpp"

namespace pqxx {
class transaction_base;
}

namespace aw {

/// The checks every enqueue makes before any SQL, for callers that want
/// them before they open a transaction. Throws std::invalid_argument naming
/// the kind and the problem: a kind or queue that is empty, longer than
/// defaults::max_name_length bytes or holds a control character; args or
/// metadata that are not a JSON object (null args are `{}`); a max_attempts
/// below 1; a delay or deadline past defaults::max_duration.
void check_enqueue(const std::string& kind, const nlohmann::json& args,
                   const insert_options& opts);

/// Inserts one job in `tx` and returns its id. Null args are stored as
/// `{}`. Throws std::invalid_argument as check_enqueue() does.
int64_t enqueue(pqxx::transaction_base& tx, const std::string& kind,
                const nlohmann::json& args, const insert_options& opts = {});

/// Inserts many jobs and returns their ids in request order: jobs with no
/// option but queue and priority in one statement (column arrays), or by
/// COPY when there are defaults::copy_threshold of them or more (the
/// fastest way into PostgreSQL: ids taken from the sequence first, then
/// one COPY); the other non-unique jobs in one more statement, unique jobs
/// in a statement each (see unique_options: their id is the existing
/// job's when one blocks them). One NOTIFY per statement and queue.
std::vector<int64_t> enqueue_many(pqxx::transaction_base& tx,
                                  const std::vector<enqueue_request>& jobs);

/// Typed form: `Args` names its kind in `static constexpr const char* kind`
/// and converts to JSON with nlohmann's to_json. (Only for types with a
/// `kind` member, so `enqueue(tx, "kind", json)` never lands here.)
template <class Args, class = decltype(Args::kind)>
int64_t enqueue(pqxx::transaction_base& tx, const Args& args,
                const insert_options& opts = {}) {
  return enqueue(tx, Args::kind, nlohmann::json(args), opts);
}

} // namespace aw
