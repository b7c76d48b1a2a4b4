#pragma once
// One database connection with the runtime's named, prepared statements:
// claim, finish, heartbeat, release, rescue, cleanup. The storage actor owns
// one of these. Every method blocks; none may run on CAF's cooperative
// scheduler.
//
// Jobs are claimed two ways (migrations/004_fast_lane.sql): plain due jobs
// from a lane, in batches that write one row per batch and nothing per job;
// everything else (retries, scheduled jobs, ordering keys, unique jobs) as
// its own row, as before. Every write that finalizes a run is guarded by
// the run's identity: its batch, or its row's attempt and owner.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/observer.hpp"
#include "actor_worker/storage/backend.hpp"
#include "actor_worker/storage/enqueue.hpp"

namespace pqxx {
class connection_base;
class result;
class transaction_base;
}

namespace aw::storage {

/// A queue's cluster-wide limits as a worker's configuration sets them
/// ([queues.Q] global_concurrency, rate_limit; 0 = no limit).
struct queue_limit_settings {
  std::string queue;
  int global_concurrency = 0;
  /// At most rate_limit claims per rate_period_ms (1000 or 60000).
  int rate_limit = 0;
  int64_t rate_period_ms = 0;
};

/// What a job_store needs to know about its worker.
struct job_store_options {
  /// libpq connection string. Never logged.
  std::string url;
  /// Written to `locked_by` (and claim_batches.worker) on claim; every
  /// write checks it, so a worker never changes a run it no longer owns.
  std::string worker_id;
  /// Failed attempts before dead-lettering, for jobs without max_attempts.
  int max_retries = 20;
  /// 0 deletes completed rows at once instead of keeping them.
  std::chrono::milliseconds completed_retention{0};
  /// Dead letters older than this are deleted by delete_expired(); 0 keeps
  /// them.
  std::chrono::milliseconds dead_letter_retention{0};
  /// A job whose lease is older than this is rescued.
  std::chrono::milliseconds reclaim_window{120'000};
  /// The heartbeat interval.
  std::chrono::milliseconds heartbeat_interval{30'000};
  /// This process, for its row in worker_nodes: node name, host, version
  /// and the queues it serves.
  std::string node;
  std::string host;
  std::string version;
  std::vector<std::string> queues;
  /// The limits of the queues it serves, written into queue_controls at
  /// start (apply_queue_controls()).
  std::vector<queue_limit_settings> queue_limits;
  /// How long a transaction may hold a lane's commit-order fence before the
  /// jobs waiting behind it are claimed the row-per-state way instead.
  std::chrono::milliseconds fence_wait{200};
  /// Prepare the statements once per connection (named prepared
  /// statements). Off behind a pooler in transaction mode, which may hand
  /// each transaction a different server session.
  bool prepared_statements = true;
};

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

  /// Claims up to `limit` due jobs of `queue` whose args and metadata take
  /// at most `max_bytes` (but at least one job), in claim order: priority,
  /// then run_at and id (row-per-state jobs) or enqueue order (lanes). A
  /// job without a deadline of its own gets `default_deadline_ms` (0 =
  /// none). One statement, one round trip.
  claim_result claim(const std::string& queue, int limit,
                     int64_t max_bytes = int64_t{1} << 40,
                     int64_t default_deadline_ms = 0);

  /// True when finish_and_claim() can record `outcomes`: all are
  /// completions of lane jobs nobody observes (no events, no follow-ups).
  static bool fusable(const std::vector<job_outcome>& outcomes);

  /// finish() and claim() in one statement: one round trip and one commit
  /// for the hot loop. Only for fusable() outcomes. `in_doubt` as for
  /// finish().
  std::pair<std::vector<finish_report>, claim_result>
  finish_and_claim(const std::vector<job_outcome>& outcomes,
                   const std::string& queue, int limit, int64_t max_bytes,
                   int64_t default_deadline_ms, bool in_doubt = false);

  /// Refreshes the leases of running row-per-state jobs and of open lane
  /// batches (one statement each); reports those still ours.
  heartbeat_report heartbeat(const std::vector<int64_t>& jobs,
                             const std::vector<int64_t>& batches = {});

  /// Rescues up to `limit` jobs, of any worker, whose lease expired (lane
  /// batches first become ordinary running rows), and waiting jobs whose
  /// callback timed out: charged a failed attempt, rescheduled with backoff
  /// or dead-lettered.
  std::vector<rescued_job> rescue(int limit);

  /// Applies many outcomes in one transaction, with their follow-ups.
  /// Lane completions are one statement per flush. Returns one report per
  /// outcome, in order. `in_doubt`: these outcomes were sent before and
  /// the connection broke before the answer, so that commit may have
  /// happened; lane completions already recorded are not counted twice.
  /// (Row-per-state outcomes need no care: each is guarded by its run.)
  std::vector<finish_report> finish(const std::vector<job_outcome>& outcomes,
                                    bool in_doubt = false);

  /// Kinds whose transitions someone observes (hooks or follow-ups): only
  /// for those do claims and completions return the row.
  void observe(const std::vector<std::string>& kinds);

  /// The kinds this worker runs: claims take only jobs of these and set
  /// aside lane jobs of others for workers that run them. Never called:
  /// every kind.
  void serve(const std::vector<std::string>& kinds);

  /// Inserts the follow-ups of already committed transitions (rescues) in
  /// a transaction of their own.
  void enqueue_follow_ups(const std::vector<job_event>& events);

  /// Installs the follow-up computation run inside finish()'s transaction.
  void set_follow_ups(follow_up_function fn) {
    follow_ups_ = std::move(fn);
  }

  /// Puts jobs this worker still holds back, due at once, without charging
  /// an attempt, and wakes other workers. `started`: their handlers ran
  /// (the attempt stays counted as started); otherwise they were claimed
  /// but never started. Returns how many were released.
  int64_t release(const std::vector<held_job>& jobs, bool started = true);

  /// release() for jobs as claimed.
  int64_t release(const std::vector<claimed_job>& jobs, bool started = true);

  /// Deletes up to about `batch` finished rows whose retention passed,
  /// and as many dead letters past dead_letter_retention (when set), and
  /// forgets cancel requests whose job finished. Returns how many rows
  /// (jobs and dead letters) it deleted.
  int64_t delete_expired(int batch);

  /// Which of `jobs` (held by this worker) an operator asked to cancel
  /// (`actor-worker jobs cancel`), in no particular order.
  std::vector<int64_t> cancel_requests(const std::vector<int64_t>& jobs);

  /// Inserts or refreshes this process's row in worker_nodes, with the
  /// number of jobs it holds; a `candidate` also takes the leader lease
  /// (cluster_leader) when it is free or expired, or renews its own.
  /// Returns whether this process holds the lease now.
  bool refresh_node(int64_t held, bool candidate);

  /// Gives the leader lease up if this process holds it, and NOTIFYs the
  /// other candidates (a graceful stop). Returns whether it held it.
  bool resign();

  /// Deletes this process's row in worker_nodes (a graceful stop).
  void leave();

  /// Writes the configured limits (options' queue_limits) into
  /// queue_controls, one row per served queue, leaving pauses as they are.
  /// Returns one line per limit it changed ("queue mail: global_concurrency
  /// 5 -> 3"), for the log: the last node started wins.
  std::vector<std::string> apply_queue_controls();

  /// Seconds since each of `jobs` became due (its run_at), by id; jobs no
  /// longer there are left out.
  std::vector<std::pair<int64_t, double>>
  wait_times(const std::vector<int64_t>& jobs);

  /// One sample of every queue's live jobs by state and its oldest due
  /// job (storage/sql/queue_samples.sql), sorted by queue.
  queue_samples sample_queues();

  /// The queue tables' housekeeping after a cleanup round: the lane
  /// partitions (maintain_lane_partitions), then a vacuum of each lane
  /// table (claim_batches, batch_completions, claim_cursors) whose dead
  /// tuples passed `min_dead` and `share` of its live rows. Returns what it
  /// did, one line each ("vacuumed claim_batches", "dropped lane partition
  /// job_rows_lane_3").
  std::vector<std::string> vacuum(int64_t min_dead, double share);

  /// Lane partitions (migrations/019_lane_partitions.sql): starts the next
  /// generation when the current one is due (see
  /// defaults::lane_generations_per_retention; added and started in two
  /// transactions, migrations/021), finishes a detach that was
  /// interrupted, and detaches and drops the partition whose jobs all
  /// finished longer ago than the retention. A lock it cannot get within
  /// defaults::lane_partition_lock_timeout waits for the next round.
  /// Returns what it did.
  std::vector<std::string> maintain_lane_partitions();

  /// The connection, for the schema check. Connects first.
  pqxx::connection_base& connection();

private:
  /// How long a leader's lease lasts past its last renewal, in seconds.
  double leader_lease_seconds() const;

  /// Runs the runtime's statement `name` in `tx`: prepared on this
  /// connection, or (opts_.prepared_statements off) sent with its text.
  template <class... Args>
  pqxx::result run(pqxx::transaction_base& tx, const char* name,
                   Args&&... args);

  /// The jobs of claim rows, reading those of each lane batch claimed.
  claim_result read_batches(pqxx::result rows, const std::string& queue,
                            int64_t default_deadline_ms,
                            std::unordered_set<int64_t>* owned);

  job_store_options opts_;
  /// Text array literal of the observed kinds ("{}" for none).
  std::string observed_kinds_ = "{}";
  /// Text array literal of the served kinds; "" for every kind.
  std::string served_kinds_;
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

/// The same for booleans ("{t,f}").
std::string to_array_literal(const std::vector<bool>& flags);

/// The same for 32-bit integers.
std::string to_array_literal(const std::vector<int32_t>& values);

} // namespace aw::storage
