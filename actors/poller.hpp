#pragma once
// The poller: claims due jobs of one queue into a bounded local buffer and
// starts one executor per job as handler slots free up, never more than
// the queue's concurrency at once.
//
// Claim size does not depend on the concurrency: a claim fills the buffer
// (rows and bytes), as graphile-worker's local queue and River's fetch
// batches do, so a small concurrency still gets large claims and few
// commits per job. The buffer adapts to the jobs: its target doubles while
// handlers outrun the claims (up to local_queue_size) and halves when
// buffered jobs wait longer than prefetch_horizon before they start, so a
// node never hoards slow jobs another node could run.
//
// Jobs held locally (buffered, running, or finished with their outcome not
// yet committed) are all leased: the lease keeper heartbeats them. A
// buffered job has not started: its deadline starts with its handler, and a
// shutdown releases it without charging an attempt.
//
// A paused queue (`actor-worker queues pause`, told by NOTIFY or by a
// claim's result) is not claimed: its buffered jobs go back unstarted and
// uncharged at once, running ones finish. While paused, and while a full
// buffer leaves no room to claim, a claim of no jobs every poll_interval
// asks whether the pause holds, so a missed NOTIFY costs at most that long.
// A claim cut short by a cluster-wide limit (global_concurrency,
// rate_limit) is tried again when one of this poller's outcomes commits
// (a slot freed) or when the rate window frees, at the latest after
// poll_interval.
//
// It claims when woken (NOTIFY, local enqueue), when the buffer runs low
// while the last claim came back full (more work is likely waiting),
// shortly after a claim reported due jobs waiting behind an open
// transaction, and every poll_interval when idle. Wake-ups coalesce
// through the mailbox. A failed claim is logged at ERROR and retried with
// backoff 1 s, 2 s ... 30 s.

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "actor_worker/actors/backoff.hpp"
#include "actor_worker/actors/job_runner.hpp"
#include "actor_worker/messages/actors.hpp"
#include "actor_worker/messages/observer.hpp"

namespace aw {

/// What a queue's poller needs: its queue's settings, the storage actors, the runner and the observer.
struct poller_config {
  /// The queue this poller claims from.
  std::string queue = defaults::queue;
  /// Handlers running at once (the queue's concurrency on this node).
  int concurrency = defaults::concurrency;
  /// Most claimed jobs held locally before their handlers start.
  int local_queue_size = defaults::local_queue_size;
  /// Most bytes (args and metadata) of the claimed and running jobs held at
  /// once; a single bigger job is still claimed, alone.
  int64_t local_queue_bytes = defaults::local_queue_bytes;
  /// Idle poll interval.
  std::chrono::milliseconds poll_interval = defaults::poll_interval;
  /// Drain budget at shutdown.
  std::chrono::milliseconds shutdown_drain = defaults::shutdown_drain;
  /// How often a summary of recent activity is logged (when there was any).
  std::chrono::milliseconds report_interval = defaults::report_interval;
  /// Releases go here.
  storage_actor claimer;
  /// Claims go to these in turn (up to claims_in_flight at once); outcomes
  /// are spread over them by job id.
  std::vector<storage_actor> completers;
  /// Starts the handlers.
  std::shared_ptr<job_runner> runner;
  /// Receives `started` events of observed kinds (may be null).
  hook_dispatcher_actor hooks;
  /// Deadline of runs whose job has none of its own; 0 = none.
  std::chrono::milliseconds default_deadline{0};
  /// How long a handler that ignores its deadline's cancellation is waited
  /// for before the run is given up.
  std::chrono::milliseconds abandon_grace = defaults::heartbeat_interval;
  /// The idle poll gate, if the process has one: then this poller polls on
  /// the idle interval only while it holds a permit.
  poll_gate_actor gate;
  /// Metrics (may be null): jobs started, with their wait since due, and
  /// the running slots.
  std::shared_ptr<observer> watcher;
};

/// A claimed job waiting in the buffer.
struct buffered_job {
  /// The claimed job.
  claimed_job job;
  /// When it was claimed: its lease is at least this fresh.
  caf::actor_clock::time_point claimed_at;
};

/// The claimed jobs not started yet, in claim order: a vector read from a
/// moving head (a deque of jobs this size allocates per job).
class job_buffer {
public:
  /// True when no job waits.
  bool empty() const {
    return head_ == items_.size();
  }

  /// Jobs waiting.
  size_t size() const {
    return items_.size() - head_;
  }

  /// Appends a claimed job.
  void push_back(buffered_job job) {
    items_.push_back(std::move(job));
  }

  /// The oldest job waiting.
  buffered_job& front() {
    return items_[head_];
  }

  /// Removes the oldest job waiting.
  void pop_front() {
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 1024 && head_ * 2 >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<long>(head_));
      head_ = 0;
    }
  }

  /// The first job waiting (for iterating over them all).
  auto begin() {
    return items_.begin() + static_cast<long>(head_);
  }

  /// Past the last job waiting.
  auto end() {
    return items_.end();
  }

  /// Removes the jobs for which `pred` holds; returns how many.
  template <class Pred>
  size_t remove_if(Pred pred) {
    auto first = begin();
    auto last = std::remove_if(first, end(), pred);
    auto n = static_cast<size_t>(end() - last);
    items_.erase(last, items_.end());
    if (empty())
      clear();
    return n;
  }

  /// Drops every job waiting.
  void clear() {
    items_.clear();
    head_ = 0;
  }

private:
  std::vector<buffered_job> items_;
  size_t head_ = 0;
};

/// A job whose handler runs, or whose outcome is on its way to the
/// database.
struct started_job {
  /// The executor running it.
  executor_actor executor;
  /// Its lease (claimed_job::lease).
  int64_t lease = 0;
  /// When it was claimed: the lease is at least this fresh.
  caf::actor_clock::time_point claimed_at;
  /// Bytes of its args and metadata (counted in local_queue_bytes).
  size_t bytes = 0;
};

/// Where the claim loop is.
enum class claim_phase : uint8_t {
  /// The next trigger may claim (up to claims_in_flight at once).
  ready,
  /// A claim_atom is on its way through the mailbox.
  queued,
  /// Claims failed; only the backoff timer may claim again.
  backing_off,
};

/// Where the poller's life is: running -> draining (-> drain_expired) ->
/// stopped.
enum class poller_phase : uint8_t {
  /// Claiming and running jobs.
  running,
  /// Shutting down: no claims, running jobs get the drain budget; the drain
  /// request waits for its reply.
  draining,
  /// The drain budget ran out while a claim was in flight: its statement
  /// may run after a release commits and take the released jobs again, so
  /// the running jobs are released once the claims are back.
  drain_overdue,
  /// The drain budget ran out: what still runs is released.
  drain_expired,
  /// The drain request got its reply: nothing runs, nothing is claimed.
  stopped,
};

/// Whether the poller may poll on the idle interval (see poll_gate.hpp).
enum class permit_phase : uint8_t {
  /// Parked: claims only when woken.
  none,
  /// Asked the gate for a permit and waits for it.
  requested,
  /// Polls on the idle interval (always, without a gate).
  held,
};

/// A queue's poller: claims into its buffer, starts buffered jobs on free executors, sends their outcomes to storage, drains at shutdown.
struct poller_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "poller";

  /// Its configuration.
  poller_config cfg;
  /// Running, draining or stopped.
  poller_phase phase = poller_phase::running;
  /// Whether the next trigger may claim, a claim message is queued, or claims back off.
  claim_phase claim = claim_phase::ready;
  /// Claim requests waiting for their reply, the jobs and bytes they may
  /// bring, and the storage actor the next one goes to.
  int claims_in_flight = 0;
  /// Jobs the claims in flight may bring.
  int claiming_rows = 0;
  /// Bytes the claims in flight may bring.
  int64_t claiming_bytes = 0;
  /// The storage actor (of cfg.completers) the next claim goes to.
  size_t next_claimer = 0;
  /// Claims in flight per storage actor (of cfg.completers).
  std::vector<int> claims_at;
  /// Claimed jobs not started yet, in claim order.
  job_buffer buffer;
  /// Bytes of args and metadata of the buffered jobs.
  size_t buffer_bytes = 0;
  /// Every executor this poller spawned (at most `concurrency`), and those
  /// free for the next job. Executors are kept from job to job. Shared with
  /// the poller's exit functor, which outlives the state.
  std::shared_ptr<std::vector<executor_actor>> executors
    = std::make_shared<std::vector<executor_actor>>();
  /// Executors free for the next job.
  std::vector<executor_actor> idle_executors;
  /// Jobs whose handler runs.
  std::unordered_map<int64_t, started_job> running;
  /// Bytes of args and metadata of the running jobs.
  size_t running_bytes = 0;
  /// Jobs whose handler returned and whose outcome storage has not
  /// committed yet (still leased).
  std::unordered_map<int64_t, started_job> committing;
  /// Outcomes waiting to go to storage, per storage actor (cfg.completers),
  /// and whether a flush message is on its way through the mailbox.
  std::vector<std::vector<job_outcome>> outbox;
  /// A flush message for the outbox is on its way through the mailbox.
  bool outbox_flush_queued = false;
  /// Jobs started since their starts were last recorded (storage's
  /// started_atom).
  std::vector<held_job> unrecorded_starts;
  /// The timer that records them is armed.
  bool start_record_armed = false;
  /// Running jobs that are no longer ours (lease lost or abandoned): never
  /// released, their outcome never recorded.
  std::unordered_set<int64_t> lost;
  /// The buffer's current target (see poller.hpp).
  int prefetch = 1;
  /// The longest a job started since the last claim arrived had waited in
  /// the buffer: short waits with full claims mean the buffer is too small
  /// for the pace.
  caf::actor_clock::duration_type recent_wait{0};
  /// Work is likely waiting: the last claim came back full, or a wake-up
  /// arrived since.
  bool maybe_more = true;
  /// Wake-ups received so far. A claim remembers the count it was sent
  /// at: one that arrived while it was in flight may announce work that
  /// claim could not see, so its empty result must not clear maybe_more.
  uint64_t wakes = 0;
  /// The idle poll permit (held for good without a gate).
  permit_phase permit = permit_phase::held;
  /// The drain's reply, delivered when the phase turns stopped.
  caf::typed_response_promise<int64_t> drain_promise;
  /// Jobs released during the drain so far.
  int64_t released = 0;
  /// Release requests of the drain still waiting for their reply.
  int releases_in_flight = 0;
  /// Jobs the watchdog gave up while the database did not answer, to
  /// release once it does: their handlers started, or not. Not part of
  /// the drain: a worker that stops first leaves them to the rescue.
  std::vector<held_job> hand_back_started;
  /// Jobs given up before their handler started, to release.
  std::vector<held_job> hand_back_unstarted;
  /// A release of given-up jobs is waiting for its reply.
  bool hand_back_in_flight = false;
  /// Timers carry the generation they were armed in; a newer arm makes
  /// older ones stale (CAF 0.17 cannot cancel a delayed message).
  uint64_t timer_generation = 0;
  /// Backoff of failed claims.
  backoff claim_backoff;
  /// The last claim found a claim lock stuck (claim_result::blocked_by).
  bool claim_blocked = false;
  /// When the poller last logged a stuck claim lock.
  caf::actor_clock::time_point claim_blocked_logged_at{};
  /// Outcomes since the last activity report, by what became of the job:
  /// a snooze, a cancel or a parked job is not a failure.
  uint64_t completed = 0;
  /// Failed runs (retried or dead-lettered) since the last report.
  uint64_t failed = 0;
  /// Snoozed runs since the last report.
  uint64_t snoozed = 0;
  /// Cancelled runs since the last report.
  uint64_t cancelled = 0;
  /// Runs parked for a callback since the last report.
  uint64_t parked = 0;
  /// Stale outcomes (lease lost) since the last report.
  uint64_t stale = 0;

  /// Outcomes since the last report, all kinds together.
  uint64_t reported() const {
    return completed + failed + snoozed + cancelled + parked + stale;
  }
  /// Handlers that ran to an outcome (the exit log reports it: benchmarks
  /// check every job ran exactly once).
  uint64_t handlers_run = 0;
  /// Round trips of the claims since the last activity report, in
  /// microseconds (for its percentiles).
  std::vector<int64_t> claim_rtts;
  /// Claim statements issued (for tests and the exit log).
  uint64_t claims = 0;
  /// Jobs claimed in total.
  uint64_t claimed = 0;
  /// When the claim in flight was sent, and the round trips of all claims.
  caf::actor_clock::time_point claim_sent_at;
  /// The total round-trip time of all claims.
  caf::actor_clock::duration_type claim_time{0};
  /// Since when handler slots have been free with nothing buffered while
  /// more work was likely (the claims fell behind), and for how long in
  /// total: what the exit log reports as time starved.
  std::optional<caf::actor_clock::time_point> starved_since;
  /// The total time starved.
  caf::actor_clock::duration_type starved_time{0};

  /// The running count last reported to the observer.
  int reported_running = -1;

  /// The queue is paused cluster-wide (queue_controls): nothing is claimed
  /// or buffered; every poll_interval a claim of no jobs asks whether the
  /// pause still holds (a missed resume NOTIFY costs at most that long).
  bool paused = false;
  /// A cluster-wide limit cut the last claim: claim again when one of our
  /// outcomes commits (a global slot freed) or when the limit's timer
  /// fires, rather than at once after every claim.
  bool limited = false;

  /// Handler slots free: concurrency minus running jobs.
  int free_slots() const {
    return cfg.concurrency - static_cast<int>(running.size());
  }

  /// Bytes of args and metadata held: buffered and running jobs.
  size_t held_bytes() const {
    return buffer_bytes + running_bytes;
  }
};

using poller_pointer = poller_internal::stateful_pointer<poller_state>;

poller_internal::behavior_type poller_behavior(poller_pointer self,
                                               poller_config cfg);

} // namespace aw
