#pragma once
// The connections of transactional handlers (app/registry.hpp,
// add_transactional): a handler's SQL and its job's outcome commit in one
// transaction on one of them (job_store::transact). They are apart from the
// storage actors' connections, so a slow handler transaction never holds up
// a claim, an outcome or a heartbeat of other jobs; at most `size` such
// transactions are open at once per database, and a run waits its turn.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actor_worker/storage/job_store.hpp"

namespace aw::storage {

/// At most `size` connections for transactional handlers of one database,
/// opened on first use and kept.
class transaction_pool {
public:
  /// Connections for `opts` (the database and the worker's identity, as
  /// the storage actors have them), whose transactions return the rows of
  /// `observed_kinds` with their transitions and insert the `follow_ups`
  /// of those transitions. `limit`: the longest a transaction may stay
  /// open (database.transaction_timeout), further bounded by what is left
  /// of the job's deadline and lease.
  transaction_pool(job_store_options opts,
                   std::vector<std::string> observed_kinds,
                   follow_up_function follow_ups, int size,
                   std::chrono::milliseconds limit);
  ~transaction_pool();

  transaction_pool(const transaction_pool&) = delete;
  transaction_pool& operator=(const transaction_pool&) = delete;

  /// job_store::transact on a connection of the pool, waiting for a free
  /// one until `cancel` fires (then a retryable failure that says so,
  /// recorded the usual way). The transaction's limit is the pool's,
  /// shortened to what is left of the run's deadline (`deadline_ms` from
  /// `started`; 0 = none) and to the part of the lease a heartbeat round
  /// cannot miss (reclaim_window - 2 x heartbeat_interval). A broken
  /// connection is dropped (the next run reconnects) and its error
  /// rethrown.
  job_outcome transact(const job_outcome& job, int64_t deadline_ms,
                       std::chrono::steady_clock::time_point started,
                       const cancellation_token& cancel,
                       const job_store::transactional_body& body);

  /// job_store::register_callback on a connection of the pool (waiting
  /// for a free one until `cancel` fires: then it throws, saying so): the
  /// callback id, or nothing when the run no longer holds the job.
  std::optional<std::string>
  register_callback(int64_t job_id, int64_t lease,
                    std::chrono::milliseconds timeout,
                    const cancellation_token& cancel);

  /// The worker the pool's transactions write as (job_store_options).
  const std::string& worker_id() const {
    return opts_.worker_id;
  }

  /// The limit of a transaction of a run with `deadline_ms` (0 = none)
  /// that started `elapsed` ago.
  std::chrono::milliseconds limit_for(int64_t deadline_ms,
                                      std::chrono::milliseconds elapsed) const;

private:
  /// A connection of the pool, waiting for a free one until `cancel`
  /// fires (then none).
  std::unique_ptr<job_store> lend(const cancellation_token& cancel);

  /// Runs `fn` on a lent connection and gives it back; a connection that
  /// broke (or lost a COMMIT's reply) is dropped first.
  template <class F>
  auto on_store(std::unique_ptr<job_store> store, F fn);

  job_store_options opts_;
  std::vector<std::string> observed_kinds_;
  follow_up_function follow_ups_;
  int size_;
  std::chrono::milliseconds limit_;
  std::mutex mtx_;
  std::condition_variable freed_;
  /// Connections not lent out.
  std::vector<std::unique_ptr<job_store>> idle_;
  /// Connections made so far (idle or lent).
  int made_ = 0;
};

} // namespace aw::storage
