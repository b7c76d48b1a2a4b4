#pragma once
// One database connection with the runtime's named, prepared statements:
// claim, finish, heartbeat, release, rescue, cleanup. The storage actor owns
// one of these. Every method blocks; none may run on CAF's cooperative
// scheduler.
//
// docs/storage.md explains what the statements do: jobs inserted due are
// claimed off their lane, a batch at a time, and completed by a receipt,
// writing nothing to their rows; everything else is claimed as a row.
// Every claim is a batch, and a job's lease (claimed_job::lease) is its
// batch's id: every write that finalizes a run is guarded by it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/transaction>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/cancellation.hpp"
#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/observer.hpp"
#include "actor_worker/storage/backend.hpp"
#include "actor_worker/storage/enqueue.hpp"


namespace aw::storage {

/// A queue's cluster-wide limits as a worker's configuration sets them
/// ([queues.Q] global_concurrency, rate_limit; 0 = no limit).
struct queue_limit_settings {
  /// The queue.
  std::string queue;
  /// At most this many jobs of it held at once on all nodes; 0 = no limit.
  int global_concurrency = 0;
  /// At most rate_limit claims per rate_period_ms (1000 or 60000).
  int rate_limit = 0;
  /// The rate limit's period in ms: 1000 ("N/s") or 60000 ("N/m").
  int64_t rate_period_ms = 0;
};

/// What a job_store needs to know about its worker.
struct job_store_options {
  /// libpq connection string. Never logged.
  std::string url;
  /// Written to job_batches.worker on claim (`jobs` shows it as
  /// locked_by) and to worker_nodes.worker_id; every
  /// write checks it, so a worker never changes a run it no longer owns.
  std::string worker_id;
  /// Failed attempts before dead-lettering, for jobs without max_attempts.
  int max_retries = defaults::max_retries;
  /// 0 deletes completed rows at once instead of keeping them.
  std::chrono::milliseconds completed_retention{0};
  /// Dead letters older than this are deleted by delete_expired(); 0 keeps
  /// them.
  std::chrono::milliseconds dead_letter_retention{0};
  /// A job whose lease is older than this is rescued.
  std::chrono::milliseconds reclaim_window = defaults::reclaim_window;
  /// The heartbeat interval.
  std::chrono::milliseconds heartbeat_interval = defaults::heartbeat_interval;
  /// This process, for its row in worker_nodes: node name, host, version
  /// and the queues it serves.
  std::string node;
  /// The host the process runs on.
  std::string host;
  /// The binary's version.
  std::string version;
  /// The queues the process serves.
  std::vector<std::string> queues;
  /// The limits of the queues it serves, written into queue_controls at
  /// start (apply_queue_controls()).
  std::vector<queue_limit_settings> queue_limits;
  /// Prepare the statements once per connection (named prepared
  /// statements). Off behind a pooler in transaction mode, which may hand
  /// each transaction a different server session.
  bool prepared_statements = true;
};

/// What a transactional handler does in its transaction: its SQL in `tx`,
/// and then the run's outcome (job_outcome::kind, message, delay_ms).
/// Throwing rolls its writes back.
using transactional_body = std::function<job_outcome(pqxx::work& tx)>;

/// One run of a transactional group (job_store::transact): the run,
/// and how it ended.
struct transactional_run {
  /// The run: job_id, lease, attempt, observed, job_kind and queue.
  job_outcome job;
  /// The longest its transaction may stay open (statement and idle
  /// timeouts), counted from the group's start.
  std::chrono::milliseconds limit = defaults::transaction_timeout;
  /// Fires when the run is stopped (deadline, lost lease, cancel request,
  /// shutdown): a statement of it then running is cancelled.
  cancellation_token cancel;
  /// The handler's transactional part.
  const transactional_body* body = nullptr;
  /// Set by the group once it took the run up (under the owner's lock):
  /// whether the handler may still be started; the group asks before it
  /// starts it, and a run withdrawn meanwhile is left alone.
  std::function<bool()> may_start;

  /// How it ended (job_store::transact's result), when `again` is false.
  job_outcome result;
  /// Not run here: the group failed or ran out of time before its handler
  /// started, or its statement waited too long for a lock held by another
  /// transaction. It runs again, charged nothing.
  bool again = false;
  /// With `again`: in a transaction of its own (a lock wait), not a group.
  bool alone = false;
  /// Its handler was started in this transaction.
  bool handler_ran = false;
};

/// One database connection with the runtime's named statements (claim, finish, heartbeat, release, rescue, cleanup); every method blocks. The storage actor owns one.
class job_store {
public:
  /// A store for `opts`: the database URL, pooler mode, intervals and this process's identity.
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
  /// then the order they came due (off the lanes) or were enqueued (on a
  /// lane). A job without a deadline of its own gets `default_deadline_ms`
  /// (0 = none). One statement, one round trip.
  claim_result claim(const std::string& queue, int limit,
                     int64_t max_bytes = int64_t{1} << 40,
                     int64_t default_deadline_ms = 0);

  /// finish() and claim(): when every outcome is a completion of a lane
  /// job nobody observes (the hot loop), one statement, one round trip and
  /// one commit; otherwise finish(), then claim(). `in_doubt` as for
  /// finish().
  std::pair<std::vector<finish_report>, claim_result>
  finish_and_claim(const std::vector<job_outcome>& outcomes,
                   const std::string& queue, int limit, int64_t max_bytes,
                   int64_t default_deadline_ms, bool in_doubt = false);

  /// The leases of the jobs this worker holds (one per job): returns the
  /// distinct leases still its own (a rescue took the others back).
  std::vector<int64_t> heartbeat(const std::vector<int64_t>& leases);

  /// Rescues up to `limit` jobs of workers that stopped or went silent
  /// for the reclaim window, and waiting jobs whose callback timed out:
  /// charged a failed attempt, rescheduled with backoff or dead-lettered.
  std::vector<rescued_job> rescue(int limit);

  /// Applies many outcomes in one transaction, with their follow-ups.
  /// Lane completions are one statement per flush. Returns one report per
  /// outcome, in order. `in_doubt`: these outcomes were sent before and
  /// the connection broke before the answer, so that commit may have
  /// happened: the server process that ran it goes first (it may still be
  /// running it), then a lane completion recorded twice counts once, and
  /// any other outcome finds its lease no longer running and reports
  /// itself stale. `failures`: whether the follow-ups of retried and
  /// dead-lettered jobs are inserted too, or left to the caller
  /// (enqueue_follow_ups).
  std::vector<finish_report>
  finish(const std::vector<job_outcome>& outcomes, bool in_doubt = false,
         failure_follow_ups failures = failure_follow_ups::in_transaction);

  /// Runs transactional handlers: the handlers of `runs` (at most
  /// defaults::max_transactional_group; one is a transaction per run) in
  /// one transaction, in order, each in a savepoint of its own, with the
  /// outcomes they return and those outcomes' follow-ups, all committed at
  /// once. First the transaction takes every run's lease in one statement
  /// (a lane job becomes a running row of its batch, and the rows are
  /// locked, so nothing else finishes or moves the jobs meanwhile) and
  /// limits itself to the shortest run's `limit` (statement and idle
  /// timeouts); with more than one run, no statement waits longer than
  /// `lock_timeout` for a lock (0: no bound). Sets each run's `result`,
  /// with `record`:
  ///  - committed: its outcome committed (`event` for the hooks). A
  ///    handler that throws, or whose SQL fails, rolls back to its
  ///    savepoint (its writes are gone, the others' stay) and its failure
  ///    (retryable, or terminal for aw::terminal_error) commits so;
  ///  - stale: the lease no longer held the job when the transaction
  ///    started: nothing run, nothing written (ec::stale_run);
  ///  - pending: rolled back (to its savepoint, or with the transaction)
  ///    because `cancel` fired or its limit passed, the transaction broke
  ///    after its handler ran, or the COMMIT's reply was lost and reading
  ///    showed it had not happened: a retryable failure that says so, for
  ///    storage to record the usual way (guarded by the same lease);
  /// or `again` (charged nothing, its handler did not run here): the
  /// transaction broke or ran out of time before its handler started, or
  /// (`alone`) a statement of it waited past `lock_timeout`.
  /// A COMMIT whose reply is lost is resolved by reading, never by writing
  /// again: the server process that sent it is ended first, then the
  /// leases are read. Throws pqxx's errors when the transaction failed
  /// before any handler started (nothing written).
  void transact(const std::vector<transactional_run*>& runs,
                std::chrono::milliseconds lock_timeout);

  /// Registers a callback id for job `job_id` while run `lease` of this
  /// worker holds it, timing out `timeout` from now, in a transaction of
  /// its own (storage/callbacks.hpp, register_running_callback): the id,
  /// or nothing when the run no longer holds the job.
  std::optional<std::string> register_callback(int64_t job_id, int64_t lease,
                                               std::chrono::milliseconds timeout);

  /// Kinds whose transitions someone observes (hooks or follow-ups): only
  /// for those do claims and completions return the row.
  void observe(const std::vector<std::string>& kinds);

  /// The kinds this worker runs: claims take only jobs of these and set
  /// aside lane jobs of others for workers that run them. Never called:
  /// every kind.
  void serve(const std::vector<std::string>& kinds);

  /// Inserts the follow-ups of already committed transitions (rescues, and
  /// retries and dead-letterings recorded with
  /// failure_follow_ups::after_commit) in a transaction of their own.
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

  /// Records that the handlers of these held jobs started (one job_starts
  /// row per claim): a rescue charges only started jobs.
  void record_starts(const std::vector<held_job>& jobs);

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
  /// job (storage/sql/samples.sql:queue_samples), sorted by queue; a process not
  /// seen for the reclaim window serves no job of it (unserved).
  queue_samples sample_queues();

  /// The queue tables' housekeeping after a cleanup round: the ring
  /// (maintain_ring), then a vacuum of each small queue table whose dead
  /// tuples passed `min_dead` and `share` of its live rows. Returns what it
  /// did, one line each ("vacuumed jobs_unique", "emptied ring slot 3 ...").
  /// A table vacuumed before is vacuumed again only once its dead tuples
  /// grew by `min_dead` since: while a transaction is open, a vacuum
  /// removes none of them, and repeating it every round only costs.
  std::vector<std::string> vacuum(int64_t min_dead, double share);

  /// The ring (docs/storage.md): sets its period from completed_retention
  /// (defaults::ring_period_share of it, within defaults::ring_period_min
  /// and _max) and empties the slot that came due. A lock it cannot get
  /// within defaults::ring_lock_timeout waits for the next round; a round
  /// carries at most `max_carried` jobs the slot still needs into the
  /// current slot, and empties the slot once fewer were left. Returns what
  /// it did.
  std::vector<std::string>
  maintain_ring(int max_carried = defaults::ring_max_carried);

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

  /// Whether finish_in's caller holds the leases of its lane jobs in `tx`
  /// already (a transactional group, since its begin): then their
  /// completions check nothing again.
  enum class leases { to_check, held };

  /// finish()'s work, in `tx` (not committed): the parts below, in order.
  std::vector<finish_report>
  finish_in(pqxx::transaction_base& tx, const std::vector<job_outcome>& outcomes,
            failure_follow_ups failures = failure_follow_ups::in_transaction,
            leases lane_leases = leases::to_check);

  /// Outcomes of lane jobs: completions as receipts (their reports
  /// filled); the others' jobs made running rows of their batches. Returns
  /// the ids so made, sorted (the rest of them are stale).
  std::vector<int64_t> finish_lane_jobs(pqxx::transaction_base& tx,
                                        const std::vector<job_outcome>& outcomes,
                                        std::vector<finish_report>& reports,
                                        leases lane_leases);

  /// Completions of row-claimed jobs, each guarded by its lease.
  void complete_row_jobs(pqxx::transaction_base& tx,
                         const std::vector<job_outcome>& outcomes,
                         std::vector<finish_report>& reports);

  /// Every outcome but a completion, of row-claimed jobs and of the lane
  /// jobs in `materialized` (sorted ids).
  void record_other_outcomes(pqxx::transaction_base& tx,
                             const std::vector<job_outcome>& outcomes,
                             const std::vector<int64_t>& materialized,
                             std::vector<finish_report>& reports);

  /// Parks job `o` waiting for its callback, and applies the resolution
  /// that came while it ran, if one did (both commit together).
  void park(pqxx::transaction_base& tx, const job_outcome& o,
            finish_report& report);

  /// The follow-ups of the transitions in `reports`, inserted in `tx`
  /// (those of rescues, and of retries and dead-letterings when `failures`
  /// says so, are left for after the commit).
  void insert_follow_ups(pqxx::transaction_base& tx,
                         const std::vector<finish_report>& reports,
                         failure_follow_ups failures);

  /// transact()'s parts. A group's transaction while it is open.
  struct group_state;
  /// The first statements of a group's transaction: its limits (`limit`,
  /// `lock_timeout`: milliseconds as text), and the leases of `runs`,
  /// held until it ends. Returns the ids held.
  std::set<int64_t> begin_group(pqxx::work& tx,
                                const std::vector<transactional_run*>& runs,
                                const std::string& limit,
                                const std::string& lock_timeout);
  /// Runs `r`'s handler in a savepoint of `tx`: true when its outcome (or
  /// its failure) is to commit, false when `r` is settled otherwise
  /// (result, or again). Throws when the transaction is lost.
  bool run_in_savepoint(pqxx::work& tx, transactional_run& r,
                        group_state& group);
  /// Records the outcomes of `ran` and commits; a COMMIT whose reply is
  /// lost is resolved by reading.
  void commit_group(std::optional<pqxx::work>& open,
                    const std::vector<transactional_run*>& ran,
                    group_state& group);

  /// After a transactional handler's COMMIT got no reply: ends the server
  /// process that sent it (`pid`, started at `started`), then reads whether
  /// the lease of `job` still holds its job (then the commit did not
  /// happen). Retries until it can read; nothing when `cancel` fires
  /// first.
  std::optional<bool> still_held_after_lost_commit(const job_outcome& job, int pid,
                                    const std::string& started,
                                    const cancellation_token& cancel);

  /// Ends server process `pid` (started at `started`) if it is still
  /// there, waiting up to 10 s for it to go: whatever it was committing has
  /// then committed or never will. Needs a connection.
  void end_backend(int pid, const std::string& started);

  /// Before outcomes in doubt are sent again: ends the server process of
  /// the connection that broke under them (lost_backend_), if known, so
  /// that its statement cannot commit after theirs (a completion counted
  /// twice). Behind a transaction-mode pooler the process is not this
  /// session's, and nothing is ended.
  void end_lost_backend();

  job_store_options opts_;
  /// Text array literal of the observed kinds ("{}" for none).
  std::string observed_kinds_ = "{}";
  /// The same kinds, to look up.
  std::set<std::string> observed_;
  /// Text array literal of the served kinds; "" for every kind.
  std::string served_kinds_;
  follow_up_function follow_ups_;
  /// Each table vacuum() vacuumed, and its dead tuples when it did.
  std::map<std::string, int64_t> dead_when_vacuumed_;
  /// This connection's server process and its start time (backend_start),
  /// read when it connects (without a pooler) or by the first transact()
  /// on it: "" until then.
  std::string backend_started_;
  /// The server process of the last connection that broke, and its start
  /// time (end_lost_backend()); pid 0: none known.
  int lost_backend_pid_ = 0;
  std::string lost_backend_started_;
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
