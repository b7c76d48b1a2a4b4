#pragma once
// A job to enqueue and its options: what producers, follow-up callables and
// the CLI hand to storage/enqueue.hpp.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actor_worker/config/defaults.hpp"

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
  std::string queue = defaults::queue;
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
  /// The job's kind (selects the handler).
  std::string kind;
  /// The job's args (a JSON object).
  nlohmann::json args = nlohmann::json::object();
  /// Queue, priority, run time, attempts, deadline, uniqueness ...
  insert_options options;
};

} // namespace aw
