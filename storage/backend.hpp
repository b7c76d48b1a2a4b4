#pragma once
// What the storage actor needs from a database, as a small interface whose
// calls return their errors instead of throwing. The PostgreSQL backend
// (pg_backend.hpp) is the real one; the deterministic actor tests drive the
// storage actor's batching, splitting and retrying over a scripted fake.
//
// Errors are CAF errors of category "aw" (messages/error.hpp):
// ec::database_unavailable when the connection broke or the server refused
// it (transient; the backend reconnects on its next call, and a write that
// broke off may or may not have committed), ec::database_error when the
// database rejected the statement itself, ec::schema_outdated from
// check_schema(). Every message says what was being done.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actor_worker/messages/enqueue_request.hpp"
#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/observer.hpp"
#include "actor_worker/messages/periodic_schedule.hpp"

namespace aw::storage {

/// What finishing one outcome did.
struct finish_report {
  /// Applied, or stale (the run's lease no longer held the job).
  finish_result result = finish_result::stale;
  /// The transition fires an event (and has the committed row in
  /// event.job_json when the kind is observed).
  bool has_event = false;
  /// The event, when has_event.
  job_event event;
  /// A park that applied, in the same transaction, a callback resolution
  /// kept while the job ran: it fires `resolution` after `event`.
  bool has_resolution = false;
  /// The resolution's event (completed, exhausted or retried), when
  /// has_resolution.
  job_event resolution;
};

/// One claim: up to `limit` due jobs of `queue` whose args and metadata
/// take at most `max_bytes` (but at least one job); jobs without a deadline
/// of their own get `default_deadline_ms` (0 = none).
struct claim_request {
  /// The queue to claim from.
  std::string queue;
  /// At most this many jobs.
  int limit = 1;
  /// At most this many bytes of args and metadata (but at least one job).
  int64_t max_bytes = int64_t{1} << 40;
  /// The deadline of jobs without one of their own; 0 = none.
  int64_t default_deadline_ms = 0;
};

/// Where finish() inserts the follow-ups of failures: of jobs retried
/// (retried) and of jobs dead-lettered (exhausted).
enum class failure_follow_ups : uint8_t {
  /// In the outcomes' transaction: both commit or neither does.
  in_transaction,
  /// Not at all: the caller inserts them after the commit, best effort (as
  /// a rescue's), so that a follow-up that fails cannot keep its job from
  /// its retry or the dead letter queue (its job would stay running until
  /// a rescue).
  after_commit,
};

/// Computes the durable follow-up jobs of a committed transition, inside
/// its transaction. Throwing rolls the whole transaction back.
using follow_up_function
  = std::function<std::vector<enqueue_request>(const job_event&)>;

/// What the storage actor needs from a database: calls that return their errors (caf::expected) instead of throwing. pg_backend is the real one; the actor tests use a scripted fake.
class backend {
public:
  virtual ~backend();

  /// Claims due jobs, in claim order. One statement.
  virtual caf::expected<claim_result> claim(const claim_request& req) = 0;

  /// finish() and claim() in one commit (one statement when the outcomes
  /// allow it): the hot loop's round trip. All or nothing as finish().
  virtual caf::expected<std::pair<std::vector<finish_report>, claim_result>>
  finish_and_claim(const std::vector<job_outcome>& outcomes,
                   const claim_request& req, bool in_doubt) = 0;

  /// Records outcomes in one transaction with their follow-ups; one report
  /// per outcome, in order. `in_doubt`: these outcomes were sent before and
  /// the connection broke before the answer, so that commit may have
  /// happened and must not be counted twice. `failures`: whether the
  /// follow-ups of retried and dead-lettered jobs go in the transaction too. All or
  /// nothing: an error means none was recorded (or, for
  /// database_unavailable, perhaps all).
  virtual caf::expected<std::vector<finish_report>>
  finish(const std::vector<job_outcome>& outcomes, bool in_doubt,
         failure_follow_ups failures) = 0;

  /// The leases of the jobs this worker holds (claimed_job::lease, one per
  /// job): returns the leases still its own (a rescue took the others
  /// back).
  virtual caf::expected<std::vector<int64_t>>
  heartbeat(const std::vector<int64_t>& leases) = 0;

  /// Which of `jobs` (held by this worker) an operator asked to cancel.
  virtual caf::expected<std::vector<int64_t>>
  cancel_requests(const std::vector<int64_t>& jobs) = 0;

  /// Rescues up to `limit` expired leases and timed-out callbacks of any
  /// worker.
  virtual caf::expected<std::vector<rescued_job>> rescue(int limit) = 0;

  /// Inserts the follow-ups of already committed transitions (rescues,
  /// and retries and dead-letterings recorded with
  /// failure_follow_ups::after_commit).
  virtual caf::error enqueue_follow_ups(const std::vector<job_event>& events)
    = 0;

  /// Puts jobs this worker holds back, due at once, without charging an
  /// attempt. Returns how many were released.
  virtual caf::expected<int64_t> release(const std::vector<held_job>& jobs,
                                         bool started) = 0;

  /// Records that the handlers of these held jobs started, so a rescue of
  /// this worker charges them and gives the jobs it only buffered back
  /// uncharged (migrations/002_job_starts.sql).
  virtual caf::error record_starts(const std::vector<held_job>& jobs) = 0;

  /// Deletes up to about `batch` finished rows past their retention.
  virtual caf::expected<int64_t> delete_expired(int batch) = 0;

  /// The queue tables' housekeeping after a cleanup round: empties the
  /// ring slot that came due (docs/storage.md), and vacuums the queue
  /// tables whose dead tuples passed their bound; returns what it did, one
  /// line each.
  virtual caf::expected<std::vector<std::string>> vacuum(int64_t min_dead,
                                                         double share) = 0;

  /// Inserts or refreshes this process's row in worker_nodes (`held`: the
  /// jobs it holds); a `candidate` also takes or renews the leader lease.
  /// Returns whether this process is the leader. The default has no
  /// cluster: every candidate leads alone.
  virtual caf::expected<bool> refresh_node(int64_t /*held*/, bool candidate) {
    return candidate;
  }
  /// Gives the leader lease up (a graceful stop); returns whether this
  /// process held it. The default holds nothing.
  virtual caf::expected<bool> resign() {
    return false;
  }
  /// Deletes this process's row (a graceful stop). The default does
  /// nothing.
  virtual caf::error leave() {
    return {};
  }
  /// Writes this worker's configured queue limits into queue_controls;
  /// returns one line per limit it changed. The default has none.
  virtual caf::expected<std::vector<std::string>> apply_queue_controls() {
    return std::vector<std::string>{};
  }
  /// Seconds since each of `jobs` became due, by id (for the pickup
  /// latency metric). The default knows none.
  virtual caf::expected<std::vector<std::pair<int64_t, double>>>
  wait_times(const std::vector<int64_t>& /*jobs*/) {
    return std::vector<std::pair<int64_t, double>>{};
  }
  /// A sample of every queue's live jobs by state (for the queue-depth
  /// metrics). The default has none.
  virtual caf::expected<queue_samples> sample_queues() {
    return queue_samples{};
  }
  /// Every row of periodic_schedules (the periodic scheduler's start).
  virtual caf::expected<std::vector<periodic_row>> periodic_rows() = 0;

  /// Takes `tick` of its schedule and enqueues its job in one transaction;
  /// the job's id, or 0 when another scheduler took this tick or a later
  /// one (storage/periodic_schedules.hpp).
  virtual caf::expected<int64_t> enqueue_tick(const periodic_tick& tick) = 0;

  /// Verifies every table, column and function the statements use:
  /// ec::schema_outdated lists what is missing.
  virtual caf::error check_schema() = 0;
};

} // namespace aw::storage
