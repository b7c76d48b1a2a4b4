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

/// How enqueue_many stores the jobs it puts on a lane (those with no option
/// but queue and priority).
enum class bulk_layout {
  /// A job_rows row each: every job is in the `jobs` view, found by id
  /// through its index. About 90,000 jobs/s from one client on 2 cores.
  rows,
  /// Packs (migrations/020_job_packs.sql): one row per queue, priority and
  /// defaults::max_pack_jobs jobs, their kinds and args as arrays; 4-5x
  /// faster (bench/results/2026-12-02-packed-enqueue.md). Packed jobs run,
  /// retry and report like any other, but are listed by the `packed_jobs`
  /// view rather than `jobs` until something but completion happens to
  /// them; their ids are 2^52 and up, and `packed_jobs` reads every pack
  /// for a lookup by id (use actor_worker_packed_jobs(ids) or `jobs show`).
  packed,
};

/// Inserts many jobs and returns their ids in request order: jobs with no
/// option but queue and priority in one statement (column arrays, the
/// fast path) or, with bulk_layout::packed, in one pack per queue and
/// priority (per max_pack_jobs of them), the other non-unique jobs in one
/// more statement, unique jobs in a statement each (see unique_options:
/// their id is the existing job's when one blocks them). One NOTIFY per
/// statement and queue.
std::vector<int64_t> enqueue_many(pqxx::transaction_base& tx,
                                  const std::vector<enqueue_request>& jobs,
                                  bulk_layout layout = bulk_layout::rows);

/// Typed form: `Args` names its kind in `static constexpr const char* kind`
/// and converts to JSON with nlohmann's to_json. (Only for types with a
/// `kind` member, so `enqueue(tx, "kind", json)` never lands here.)
template <class Args, class = decltype(Args::kind)>
int64_t enqueue(pqxx::transaction_base& tx, const Args& args,
                const insert_options& opts = {}) {
  return enqueue(tx, Args::kind, nlohmann::json(args), opts);
}

} // namespace aw
