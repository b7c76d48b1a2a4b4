#pragma once
// One database connection with the runtime's named, prepared statements:
// claim, finish, release, cleanup. The storage actor owns one of these.
// Every method blocks; none may run on CAF's cooperative scheduler.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "messages/job.hpp"
#include "storage/enqueue.hpp"

namespace pqxx {
class connection_base;
}

namespace aw::storage {

/// What a job_store needs to know about its worker.
struct job_store_options {
  /// libpq connection string. Never logged.
  std::string url;
  /// Written to `locked_by` on claim; every write checks it, so a worker
  /// never changes a row it no longer owns.
  std::string worker_id;
  /// Failed attempts before dead-lettering, for jobs without max_attempts.
  int max_retries = 20;
  /// 0 deletes completed rows at once instead of marking them.
  std::chrono::milliseconds completed_retention{0};
  /// A running job whose lease is older than this is rescued.
  std::chrono::milliseconds reclaim_window{120'000};
  /// The heartbeat interval; also the grace a job's owner gets to end an
  /// overdue run itself before another node rescues it.
  std::chrono::milliseconds heartbeat_interval{30'000};
};

/// What finish() did with one outcome.
struct finish_report {
  finish_result result = finish_result::stale;
  /// The transition fires an event (and has the committed row in
  /// event.job_json when the kind is observed).
  bool has_event = false;
  job_event event;
};

/// Computes the durable follow-up jobs of a committed transition, inside
/// its transaction. Throwing rolls the whole transaction back.
using follow_up_function
  = std::function<std::vector<enqueue_request>(const job_event&)>;

class job_store {
public:
  explicit job_store(job_store_options opts);
  ~job_store();

  job_store(const job_store&) = delete;
  job_store& operator=(const job_store&) = delete;

  /// Opens the connection and prepares the statements if not yet open.
  /// Throws pqxx::broken_connection when the server is unreachable.
  void connect();

  /// Drops the connection (after an error); the next call reconnects.
  void disconnect() noexcept;

  bool connected() const noexcept;

  /// Claims up to `limit` due jobs of `queue` (FOR UPDATE SKIP LOCKED),
  /// in claim order: priority, run_at, id. A job without a deadline of its
  /// own gets `default_deadline_ms` (0 = none).
  std::vector<claimed_job> claim(const std::string& queue, int limit,
                                 int64_t default_deadline_ms = 0,
                                 std::vector<job_event>* started = nullptr);

  /// Refreshes the leases of `ids` (one statement); returns those still
  /// running under this worker.
  std::vector<int64_t> heartbeat(const std::vector<int64_t>& ids);

  /// Rescues up to `limit` running jobs, of any worker, whose lease expired
  /// or whose deadline passed: charged a failed attempt, rescheduled with
  /// backoff or dead-lettered.
  std::vector<rescued_job> rescue(int limit);

  /// Applies many outcomes in one transaction, with their follow-ups.
  /// Completions are one statement for the whole batch. Returns one report
  /// per outcome, in order.
  std::vector<finish_report> finish(const std::vector<job_outcome>& outcomes);

  /// Kinds whose transitions someone observes (hooks or follow-ups): only
  /// for those does a completion return its row.
  void observe(const std::vector<std::string>& kinds);

  /// Inserts the follow-ups of already committed transitions (rescues) in
  /// a transaction of their own.
  void enqueue_follow_ups(const std::vector<job_event>& events);

  /// Installs the follow-up computation run inside finish()'s transaction.
  void set_follow_ups(follow_up_function fn) {
    follow_ups_ = std::move(fn);
  }

  /// Puts jobs this worker still holds back to `available` without
  /// charging an attempt, and wakes other workers. Returns how many.
  int64_t release(const std::vector<int64_t>& ids);

  /// Deletes up to `batch` completed/cancelled rows finalized more than the
  /// retention ago. Returns how many.
  int64_t delete_expired(int batch);

  /// The connection, for the schema check. Connects first.
  pqxx::connection_base& connection();

  const job_store_options& options() const noexcept {
    return opts_;
  }

private:
  job_store_options opts_;
  /// Text array literal of the observed kinds ("{}" for none).
  std::string observed_kinds_ = "{}";
  follow_up_function follow_ups_;
  // pqxx::connection is a typedef (not forward-declarable) and its base has
  // no virtual destructor: the deleter, defined in the .cpp, knows the type.
  using connection_deleter = void (*)(pqxx::connection_base*);
  std::unique_ptr<pqxx::connection_base, connection_deleter> conn_;
};

/// Renders strings as a PostgreSQL text array literal, quoted and escaped,
/// for a `$1::text[]` parameter.
std::string to_text_array_literal(const std::vector<std::string>& items);

/// Renders ids as a PostgreSQL array literal ("{1,2,3}") for a
/// `$1::bigint[]` parameter: libpqxx 6 has no array parameters.
std::string to_array_literal(const std::vector<int64_t>& ids);

} // namespace aw::storage
