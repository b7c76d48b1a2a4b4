#pragma once
// Admin queries and changes on jobs, behind the CLI's `jobs list`, `jobs
// show`, `jobs cancel` and `jobs retry`. Rows come back as JSON text whose
// keys are the `jobs` view's column names.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
class transaction_base;
}

namespace aw::storage {

/// Every state a job row can have, in lifecycle order.
const std::vector<std::string>& job_states();

/// The jobs row `id` as a JSON object, or nothing if there is no such row.
std::optional<std::string> job_json(pqxx::connection_base& conn, int64_t id);

/// Which jobs `jobs list` shows: empty strings match anything.
struct job_filter {
  /// Only jobs in this state.
  std::string state;
  /// Only jobs of this queue.
  std::string queue;
  /// Only jobs of this kind.
  std::string kind;
  /// Keyset pagination: only ids above this one.
  int64_t after = 0;
  /// At most this many jobs.
  int64_t limit = 100;
};

/// One page of jobs in id order, as a JSON array.
std::string jobs_json(pqxx::connection_base& conn, const job_filter& filter);

/// Where a job is.
struct job_position {
  /// The state the job is in.
  std::string state;
  /// The worker holding it ("" when none).
  std::string locked_by;
};

/// The state of job `id`, or nothing if there is no such row.
std::optional<job_position> job_state(pqxx::connection_base& conn, int64_t id);

/// Job `id` as it was before `tx` began, or nothing if `tx` inserted it (a
/// unique enqueue returns the id of the job that blocks a duplicate).
std::optional<job_position> preexisting_job(pqxx::transaction_base& tx,
                                            int64_t id);

/// What `jobs cancel` did.
enum class cancel_result {
  /// The job had not started: it is cancelled now.
  cancelled,
  /// It runs: the request is recorded and its worker told (NOTIFY).
  requested,
  /// It had finished already (completed or cancelled): nothing changed.
  finished,
  /// No such job in the jobs table.
  not_found,
};

/// What `jobs cancel` did.
struct cancel_report {
  /// Cancelled, requested, already finished, or not found.
  cancel_result result = cancel_result::not_found;
  /// The state it was found in (for `finished`: its final state).
  job_position position;
};

/// Cancels job `id`: at once if it waits (scheduled, available,
/// waiting_external), through its worker if it runs (a row in
/// job_cancel_requests and a NOTIFY on `cancel_channel`). A claim racing
/// with it either takes the job first (then it is running) or not at all.
/// `notify_channel` wakes the queue of a job with an ordering key.
cancel_report cancel_job(pqxx::connection_base& conn, int64_t id,
                         const std::string& notify_channel,
                         const std::string& cancel_channel);

/// The same in the caller's transaction, which commits it (the dashboard
/// writes its audit row in the same transaction). Nothing is written when
/// the result is `finished` or `not_found`.
cancel_report cancel_job(pqxx::transaction_base& tx, int64_t id,
                         const std::string& notify_channel,
                         const std::string& cancel_channel);

/// What `jobs retry` did.
enum class retry_result {
  /// It waited for its run_at (scheduled, or a retry's backoff): due now.
  run_now,
  /// It had finished (completed or cancelled): it runs again, due now.
  rerun,
  /// It runs, or waits for a callback: nothing changed.
  refused,
  /// No such job in the jobs table.
  not_found,
};

/// What `jobs retry` did.
struct retry_report {
  /// Run now, rerun, refused, or not found.
  retry_result result = retry_result::not_found;
  /// The state it was found in.
  job_position position;
};

/// Makes job `id` run now (see retry_result) and wakes its queue's pollers
/// on `notify_channel`. A pending cancel request of the job is forgotten.
retry_report retry_job(pqxx::connection_base& conn, int64_t id,
                       const std::string& notify_channel);

/// The same in the caller's transaction, which commits it. Nothing is
/// written when the result is `refused` or `not_found`.
retry_report retry_job(pqxx::transaction_base& tx, int64_t id,
                       const std::string& notify_channel);

} // namespace aw::storage
