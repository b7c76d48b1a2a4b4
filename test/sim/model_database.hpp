#pragma once
// The model database: an in-memory `jobs` + `dead_letter_jobs` +
// `worker_nodes` + leases that honours the storage contract the PostgreSQL
// backend does (storage/sql/functions/*.sql), without lanes, ticks or
// snapshots: those are how the real one is fast, not what it promises.
//
// What it promises, and what this model implements:
// - a claim takes due jobs (available, or scheduled with run_at <= now) in
//   claim order (priority, run_at, id), at least one and at most `limit`
//   within `max_bytes`; every claim is one lease (a token, as a batch id)
//   shared by the jobs it took; a job whose ordering key has an earlier
//   unfinished job is skipped; a claim re-checks each job's state;
// - every write about a run carries its lease and applies only while that
//   lease still holds the job (not rescued, not released, not superseded);
// - failures charge an attempt and back off 2^(error_count+1) s, or move
//   the job to the dead letter queue on its last attempt; a terminal
//   failure dead-letters at once; a snooze does not charge; cancel; park
//   (waiting_external with a timeout);
// - follow-ups (a follow_up_function, as pg_backend's) are inserted in
//   the outcome's transaction, all or nothing; those of rescues (and of
//   failures when asked) later through enqueue_follow_ups(); unique keys
//   (unique_options: kind + args [+ queue], among the listed states) make
//   a duplicate insert nothing;
// - a worker is alive while it refreshes its worker_nodes row
//   (refresh_node); a rescue takes back the leases of a worker silent for
//   the reclaim window (or gone), claimed more than the window ago: a job
//   whose start was recorded (record_starts) is charged, one only buffered
//   goes back uncharged; expired callbacks are charged too;
// - release() gives a worker's held jobs back due at once, uncharged.
//
// Every committed transition gets a number (`transition`), written into
// the row JSON as "sim_transition", so follow-ups and hook events can be
// traced back to the commit that produced them. Every change is also
// reported to an observer (model_change) for the invariants
// (test/sim/invariants.hpp), which keep their own books and do not trust
// this code.
//
// Planted mutations (model_mutations.hpp) exist only in the simulation
// build (AW_SIM_MUTATIONS); the normal build has none of their code.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actor_worker/messages/enqueue_request.hpp"
#include "actor_worker/messages/job.hpp"
#include "actor_worker/storage/backend.hpp"

#include "sim/model_mutations.hpp"

namespace aw_sim {

/// A job's state in the model (dead = a dead_letter_jobs row).
enum class model_state : uint8_t {
  scheduled,
  available,
  running,
  waiting_external,
  completed,
  cancelled,
  dead,
};

const char* to_string(model_state s);

/// Whether a job in `s` will never run again.
inline bool is_final(model_state s) {
  return s == model_state::completed || s == model_state::cancelled
         || s == model_state::dead;
}

/// One row of the model's `jobs` (or dead_letter_jobs once dead).
struct model_job {
  int64_t id = 0;
  std::string kind;
  std::string queue;
  /// The args as JSON text.
  std::string args = "{}";
  int32_t priority = 0;
  model_state state = model_state::available;
  /// Due time, ms of the model clock.
  int64_t run_at_ms = 0;
  /// Times started (claimed), as the `attempt` column.
  int32_t attempt = 0;
  /// Failed attempts charged.
  int32_t error_count = 0;
  /// The job's own limit; 0 = the worker's max_retries + 1.
  int32_t max_attempts = 0;
  /// Its own deadline in ms; 0 = the queue's default.
  int64_t deadline_ms = 0;
  /// The lease holding it while running (0: none).
  int64_t lease = 0;
  /// The handler of the current run started (record_starts).
  bool started = false;
  /// waiting_external: when the callback times out (ms of the model clock).
  int64_t callback_timeout_ms = 0;
  std::string last_error;
  /// Jobs of one ordering key run one at a time, in id order.
  std::optional<std::string> ordering_key;
  /// The unique key and the states in which it blocks a duplicate.
  std::optional<std::string> unique_key;
  std::vector<std::string> unique_states;
  /// An operator asked to cancel it.
  bool cancel_requested = false;
};

/// One claim: a lease on the jobs it took.
struct model_lease {
  int64_t id = 0;
  std::string worker;
  int64_t claimed_at_ms = 0;
  /// A rescue took it back: every write carrying it is stale.
  bool rescued = false;
};

/// What happened, for the invariants (one record per effect, in commit
/// order).
struct model_change {
  enum class what : uint8_t {
    /// A job was inserted (`transition` is the parent's, 0 for the
    /// driver's own enqueues).
    enqueued,
    /// A claim took `job` under `lease` for `worker`.
    claimed,
    /// record_starts: the handler of `job` under `lease` started.
    started,
    /// An outcome, a rescue or a release moved `job` (lease `lease`) to
    /// `state`; `event` is the event type it fires (`has_event`).
    transitioned,
    /// A worker refreshed its worker_nodes row (its heartbeat).
    node_seen,
    /// A follow-up of transition `transition` was inserted as `job`.
    follow_up,
    /// A worker stopped gracefully (its worker_nodes row left).
    node_left,
    /// A heartbeat of `worker` listed `lease`, still its own
    /// (`transition`: the heartbeat call's number).
    lease_heartbeated,
    /// A live worker's heartbeat took back its `lease` that it does not
    /// hold (a claim whose reply it never got: take_back_orphans.sql);
    /// `transition`: the heartbeat call's number.
    taken_back,
  };
  what kind = what::enqueued;
  int64_t job = 0;
  int64_t lease = 0;
  std::string worker;
  int64_t at_ms = 0;
  /// transitioned: the new state, and what moved it.
  model_state state = model_state::available;
  enum class cause : uint8_t { outcome, rescue, release, none };
  cause by = cause::none;
  /// transitioned: the outcome's lease as written by the caller (for
  /// outcome: the lease the caller presented).
  int64_t presented_lease = 0;
  /// transitioned by release: the caller said the handlers had started.
  bool release_started = false;
  /// The transition's number (transitioned, follow_up: its parent's).
  int64_t transition = 0;
  bool has_event = false;
  aw::event_type event = aw::event_type::started;
  /// Error count before and after (shutdown must not charge).
  int32_t errors_before = 0;
  int32_t errors_after = 0;
  /// The job's handler had started (record_starts) when it moved.
  bool was_started = false;
  /// The transition's follow-ups were inserted in its own transaction
  /// (not a rescue's or an after-commit failure's, which come later, best
  /// effort, through enqueue_follow_ups).
  bool follow_ups_in_transaction = false;
  /// node_left: the worker held nothing, so its row was deleted (a later
  /// refresh inserts it again); else the row is marked left for good.
  bool row_deleted = false;
};

/// Settings of the model that mirror the worker's configuration.
struct model_settings {
  /// max_retries: a job without its own limit runs at most this + 1 times.
  int max_retries = 3;
  /// The reclaim window (ms): a worker silent this long is rescued.
  int64_t reclaim_window_ms = 4000;
};

/// The shared in-memory database. Not thread-safe: the simulation runs
/// every actor on one thread (CAF's test coordinator).
class model_database {
public:
  using observer_fn = std::function<void(const model_change&)>;

  explicit model_database(model_settings settings,
                          std::function<int64_t()> now_ms);

  /// The model's clock (ms): the simulation's virtual time plus any clock
  /// jump injected into the database server.
  int64_t now() const {
    return now_ms_();
  }

  /// Sees every change as it commits.
  observer_fn observer;
  /// The planted mutations switched on (always none without
  /// AW_SIM_MUTATIONS).
  model_mutations mutations;

  // -- what the driver does ---------------------------------------------------

  /// Inserts a job (the driver's enqueue, or a follow-up of transition
  /// `parent`). Returns its id, or the existing job's id for a duplicate of
  /// a unique job.
  int64_t enqueue(const aw::enqueue_request& req, int64_t parent = 0);
  /// An operator asks to cancel a job (`jobs cancel`).
  void request_cancel(int64_t id);

  // -- the backend's calls, each one transaction ------------------------------

  aw::claim_result claim(const std::string& worker,
                         const aw::storage::claim_request& req);
  std::vector<aw::storage::finish_report>
  finish(const std::string& worker, const std::vector<aw::job_outcome>& outcomes,
         aw::storage::failure_follow_ups failures,
         const aw::storage::follow_up_function& follow_ups);
  std::vector<int64_t> heartbeat(const std::string& worker,
                                 const std::vector<int64_t>& leases);
  std::vector<int64_t> cancel_requests(const std::vector<int64_t>& jobs) const;
  std::vector<aw::rescued_job> rescue(int limit);
  void enqueue_follow_ups(const std::vector<aw::job_event>& events,
                          const aw::storage::follow_up_function& follow_ups);
  int64_t release(const std::string& worker,
                  const std::vector<aw::held_job>& jobs, bool started);
  void record_starts(const std::vector<aw::held_job>& jobs);
  bool refresh_node(const std::string& worker, int64_t held, bool candidate);
  bool resign(const std::string& worker);
  void leave(const std::string& worker);

  /// Runs `body` as one transaction: when it throws (a follow-up that
  /// cannot be inserted), every change it made is undone and none is
  /// reported; the exception goes on to the caller.
  template <class F>
  auto transaction(F&& body) -> decltype(body()) {
    auto saved_jobs = jobs_;
    auto saved_leases = leases_;
    auto saved_nodes = nodes_;
    auto saved = std::make_tuple(leader_, leader_expires_ms, next_id_,
                                 next_lease_, transitions_);
    std::vector<model_change> changes;
    buffer_ = &changes;
    try {
      auto result = body();
      buffer_ = nullptr;
      for (auto& c : changes)
        report(c);
      return result;
    } catch (...) {
      buffer_ = nullptr;
      jobs_ = std::move(saved_jobs);
      leases_ = std::move(saved_leases);
      nodes_ = std::move(saved_nodes);
      std::tie(leader_, leader_expires_ms, next_id_, next_lease_,
               transitions_) = saved;
      throw;
    }
  }

  // -- reading it ------------------------------------------------------------

  const std::map<int64_t, model_job>& jobs() const {
    return jobs_;
  }
  const model_settings& settings() const {
    return settings_;
  }
  /// The row as JSON (the columns hooks and follow-ups read).
  std::string row_json(const model_job& j, int64_t transition) const;

private:
  /// The lease still holds the job, as every guarded write checks.
  bool holds(const model_job& j, int64_t lease) const;
  /// Charges a failed attempt: rescheduled with backoff (or `delay_ms`), or
  /// dead-lettered on the last attempt. Returns whether it died.
  bool charge(model_job& j, const std::string& message,
              std::optional<int64_t> delay_ms);
  int64_t next_transition() {
    return ++transitions_;
  }
  void report(model_change c) {
    if (buffer_ != nullptr)
      buffer_->push_back(std::move(c));
    else if (observer)
      observer(c);
  }
  /// Inserts the follow-ups of `event` (transition `transition`).
  void insert_follow_ups(const aw::job_event& event, int64_t transition,
                         const aw::storage::follow_up_function& follow_ups);
  /// The transition number written into a committed row's JSON.
  static int64_t transition_of(const std::string& row_json);
  /// Takes back the open leases of live `worker` that it does not hold
  /// (not in `held`), claimed more than the window ago: claims whose
  /// commit it never heard of. The next rescue gives their jobs back.
  void take_back_orphans(const std::string& worker,
                         const std::vector<int64_t>& held, int64_t call);
  /// A job of an ordering key waits for every earlier job of its key.
  bool blocked_by_order(const model_job& j) const;
  bool is_due(const model_job& j, int64_t now) const;

  model_settings settings_;
  std::function<int64_t()> now_ms_;
  std::map<int64_t, model_job> jobs_;
  std::map<int64_t, model_lease> leases_;
  /// worker_nodes: last_seen_at (ms) and left (a graceful stop), by worker.
  struct node_row {
    int64_t last_seen_ms = 0;
    bool left = false;
    bool rescued = false;
  };
  std::map<std::string, node_row> nodes_;
  /// cluster_leader: holder and expiry.
  std::string leader_;
  int64_t leader_expires_ms = 0;
  int64_t next_id_ = 0;
  int64_t next_lease_ = 0;
  int64_t transitions_ = 0;
  /// Heartbeat calls so far (lease_heartbeated and taken_back carry the
  /// call's number in `transition`).
  int64_t heartbeats_ = 0;
  /// The changes of the open transaction, reported at its commit.
  std::vector<model_change>* buffer_ = nullptr;
};

} // namespace aw_sim
