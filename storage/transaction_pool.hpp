#pragma once
// The connections of transactional handlers (app/registry.hpp,
// add_transactional): a handler's SQL and its job's outcome commit in one
// transaction on one of them (job_store::transact), shared with other runs
// of its queue that wait at the same time (transactional_group). They are
// apart from the storage actors' connections, so a slow handler
// transaction never holds up a claim, an outcome or a heartbeat of other
// jobs; at most `size` such transactions are open at once per database,
// and a run waits its turn. A run holds no thread while it waits: groups
// run on threads the caller lends (submit's spawner), and each run's
// outcome goes to its callback (transact() waits for it instead).

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actor_worker/storage/job_store.hpp"

namespace aw::storage {

/// At most `size` connections for transactional handlers of one database,
/// opened on first use and kept. Runs of one queue are grouped: the run
/// that opens a transaction takes the queue's other waiting runs along (up
/// to its transactional_group), and their handlers share one transaction
/// and one commit (job_store::transact). While a group of the queue is
/// open, the next opens when it ends, when enough runs wait (overlap_size), or
/// defaults::transactional_group_gather after it opened.
class transaction_pool {
public:
  /// Runs a task (a group's transaction, or a wait for the gathering time
  /// to pass) on a thread that may block. It must not run the task on the
  /// calling thread: it is called with the pool's lock held.
  using spawner = std::function<void(std::function<void()>)>;

  /// Where a run's end goes: its outcome (transact()'s result), or the
  /// database's error when its transaction failed before any handler of
  /// it started. Called once, on a thread of a group or the one that
  /// cancelled the run, never with the pool's lock held.
  using run_done = std::function<void(job_outcome, std::exception_ptr)>;

  /// Connections for `opts` (the database and the worker's identity, as
  /// the storage actors have them), whose transactions return the rows of
  /// `observed_kinds` with their transitions and insert the `follow_ups`
  /// of those transitions. `limit`: the longest a transaction may stay
  /// open (database.transaction_timeout), further bounded by what is left
  /// of the jobs' deadlines and leases. `groups`: each queue's
  /// transactional_group (a queue not named: 1). `concurrency`: each
  /// queue's concurrency (overlap_size; a queue not named: a group opens
  /// beside an open one only when a full group waits).
  transaction_pool(job_store_options opts,
                   std::vector<std::string> observed_kinds,
                   follow_up_function follow_ups, int size,
                   std::chrono::milliseconds limit,
                   std::map<std::string, int> groups = {},
                   std::map<std::string, int> concurrency = {});
  ~transaction_pool();

  transaction_pool(const transaction_pool&) = delete;
  transaction_pool& operator=(const transaction_pool&) = delete;

  /// Runs `body`, the transactional part of `job`'s handler, in a
  /// transaction of the pool (job_store::transact), alone or with other
  /// runs of its queue, and returns its outcome (transactional_run::result).
  /// Waits for a connection (or for the group that took the run along)
  /// until `cancel` fires: then, unless its handler started, a retryable
  /// failure that says so, recorded the usual way. Each transaction's
  /// limit is the pool's, shortened to what is left of its runs' deadlines
  /// (`deadline_ms` from `started`; 0 = none) and to the part of the lease
  /// a heartbeat round cannot miss (lease_for()). A broken connection is
  /// dropped (the next run reconnects). Throws what the database threw
  /// when the transaction failed before any handler of it started.
  job_outcome transact(const job_outcome& job, int64_t deadline_ms,
                       std::chrono::steady_clock::time_point started,
                       const cancellation_token& cancel,
                       const transactional_body& body);

  /// transact() without a thread of its own: queues the run and returns.
  /// The group that takes it runs `body` on a thread `spawn` gives it (the
  /// spawner of the run that opened the group), and `done` gets the end:
  /// what transact() returns, or the error it throws. Nothing of the run
  /// holds a thread while it waits.
  void submit(const job_outcome& job, int64_t deadline_ms,
              std::chrono::steady_clock::time_point started,
              const cancellation_token& cancel, transactional_body body,
              run_done done, spawner spawn);

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
  struct request;
  using request_ptr = std::shared_ptr<request>;

  /// A connection of the pool, waiting for a free one until `cancel`
  /// fires (then none).
  std::unique_ptr<job_store> lend(const cancellation_token& cancel);

  /// A connection not lent out, or (none) the right to make one; call
  /// with mtx_ held and a connection free.
  std::unique_ptr<job_store> take_idle();

  /// A new connection of the pool.
  std::unique_ptr<job_store> make_store() const;

  /// Gives a lent connection back (dropped first when it broke).
  void give_back(std::unique_ptr<job_store> store);

  /// Opens every transaction that may open now: while a connection is
  /// free, a run that may open (may_open) takes its group (take_group),
  /// whose transaction runs on a thread of its spawner. A queue held back
  /// only by its gathering time gets a wait that looks again when it is
  /// over (arm_gather). mtx_ held.
  void dispatch();

  /// Looks again at `queue` once the gathering time of its last group is
  /// over, on a thread of `own`'s spawner (once per queue). mtx_ held.
  void arm_gather(const std::string& queue, const request_ptr& own);

  /// The transactional_group of `queue` (1 for a queue not named).
  size_t group_size(const std::string& queue) const;

  /// How many runs of `queue` waiting open a group while another of the
  /// queue is open: defaults::transactional_group_overlap_divisor's share
  /// of its concurrency, 2 to its group size.
  size_t overlap_size(const std::string& queue) const;

  /// Whether `own` may open a transaction now (a connection being free):
  /// when no group of its queue is open, enough runs wait (overlap_size), the
  /// gathering time passed since the last opened, or it runs alone. mtx_
  /// held.
  bool may_open(const request_ptr& own) const;

  /// `own` and up to its queue's group size - 1 runs waiting behind it
  /// (none when either runs alone), taken off the queue; mtx_ held.
  std::vector<request_ptr> take_group(const request_ptr& own);

  /// Runs `group` in one transaction on `store` (a new connection if
  /// none), then settles each run: done (its callback called), or queued
  /// again; and opens what may open then.
  void run_group(std::unique_ptr<job_store> store,
                 const std::vector<request_ptr>& group);

  /// Stops `r` waiting, cancelled by its token: unless its handler started
  /// (or it ended), it ends with a retryable failure that says so.
  void withdraw(const request_ptr& r);

  job_store_options opts_;
  std::vector<std::string> observed_kinds_;
  follow_up_function follow_ups_;
  int size_;
  std::chrono::milliseconds limit_;
  std::map<std::string, int> groups_;
  std::map<std::string, int> concurrency_;
  std::mutex mtx_;
  /// Signalled when a connection comes back: lend() waits on it. Runs
  /// wait on nothing: a run that blocked a thread of its own (and woke it
  /// when its group ended) cost the worker more CPU than its job, in
  /// futex and scheduler time.
  std::condition_variable freed_;
  /// Connections not lent out.
  std::vector<std::unique_ptr<job_store>> idle_;
  /// Connections made so far (idle or lent).
  int made_ = 0;
  /// Runs waiting for a transaction, by queue, oldest first.
  std::map<std::string, std::deque<request_ptr>> waiting_;
  /// Groups open now, by queue.
  std::map<std::string, int> open_groups_;
  /// When the last group of each queue opened.
  std::map<std::string, std::chrono::steady_clock::time_point> last_opened_;
  /// Queues with a wait for their gathering time under way (arm_gather).
  std::set<std::string> gathering_;
};

} // namespace aw::storage
