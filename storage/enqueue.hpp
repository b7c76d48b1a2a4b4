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

namespace pqxx {
class transaction_base;
}

namespace aw {

/// Makes a job unique: at most one job with the same key among the jobs in
/// `states`. The key is the kind and args, optionally the queue, optionally
/// a time bucket. A duplicate enqueue inserts nothing and returns the id of
/// the existing job. Enforced by a unique index, so concurrent producers
/// cannot both win (enqueue in READ COMMITTED, PostgreSQL's default).
struct unique_options {
  /// Jobs of different queues with the same kind and args are different.
  bool by_queue = false;
  /// Non-zero: uniqueness holds within each period (e.g. one per hour),
  /// counted from the epoch, by the database's clock.
  std::chrono::milliseconds period{0};
  /// The states in which a job blocks a duplicate. A job that moves to
  /// another state (or to the dead letter queue) no longer does.
  std::vector<std::string> states = {"scheduled", "available", "running",
                                     "waiting_external", "completed"};
};

/// Options of one enqueued job. Every field has the column's default.
struct insert_options {
  /// The queue that runs it.
  std::string queue = "default";
  /// Lower runs first, as in `nice`; negative allowed.
  int priority = 0;
  /// Runs at most this many times; unset uses the worker's max_retries + 1.
  std::optional<int> max_attempts;
  /// Not before this instant. Wins over `delay` when both are set.
  std::optional<std::chrono::system_clock::time_point> run_at;
  /// Not before now (the database's clock) plus this.
  std::chrono::milliseconds delay{0};
  /// Free-form JSON object stored with the job.
  nlohmann::json metadata = nlohmann::json::object();
  /// Labels for filtering and admin.
  std::vector<std::string> tags;
  /// Longest a run may take; an overrun is cancelled and rescued. Unset
  /// uses the queue's default deadline, if it has one.
  std::optional<std::chrono::milliseconds> deadline;
  /// Set: see unique_options.
  std::optional<unique_options> unique;
  /// Jobs sharing an ordering key run one at a time, in enqueue (id)
  /// order, across the whole cluster: a job waits until every earlier job
  /// of its key has completed, been cancelled or dead-lettered.
  std::optional<std::string> ordering_key;
};

/// One job of a bulk enqueue.
struct enqueue_request {
  std::string kind;
  nlohmann::json args = nlohmann::json::object();
  insert_options options;
};

/// Inserts one job in `tx` and returns its id. Null args are stored as `{}`. Throws std::invalid_argument
/// for an empty kind or queue, a max_attempts below 1, or metadata that is
/// not a JSON object.
int64_t enqueue(pqxx::transaction_base& tx, const std::string& kind,
                const nlohmann::json& args, const insert_options& opts = {});

/// Inserts many jobs and returns their ids in request order: jobs with no
/// option but queue and priority in one statement (column arrays, the
/// fast path), the other non-unique jobs in one more, unique jobs in a
/// statement each (see unique_options: their id is the existing job's when
/// one blocks them). One NOTIFY per statement and queue.
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
