#pragma once
// The values that travel between actors on the hot path: a claimed job
// (storage -> poller -> executor), its outcome (executor -> storage) and
// what storage made of it (storage -> poller).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace aw {

/// A job this worker has claimed: `jobs` shows it `running` and
/// locked by this worker. Args and metadata stay JSON text until a handler
/// parses them, so the actors never pay for a parse they don't need.
struct claimed_job {
  /// The job's id.
  int64_t id = 0;
  /// The lease: a token storage made for this run, opaque outside
  /// storage/. Every write about the run carries it back, and storage
  /// refuses a lease that no longer holds the job (released, rescued,
  /// claimed again), so an outcome of an earlier run can never finalize a
  /// later one.
  int64_t lease = 0;
  /// The job's kind (selects the handler).
  std::string kind;
  /// The queue it was claimed from.
  std::string queue;
  /// The `args` column as JSON text.
  std::string args;
  /// Its priority (lower runs first).
  int32_t priority = 0;
  /// Times started, including this run (so 1 on the first run).
  int32_t attempt = 0;
  /// Failed attempts charged before this run.
  int32_t error_count = 0;
  /// The job's own attempt limit; 0 when it uses the worker's max_retries.
  int32_t max_attempts = 0;
  /// The `metadata` column as JSON text.
  std::string metadata;
  /// This run's deadline in milliseconds after its handler starts; 0 for
  /// none.
  int64_t deadline_ms = 0;
  /// For kinds that hooks or follow-ups observe: the row as of the claim
  /// (JSON), for the `started` event fired when the handler starts.
  std::string started_row;
  /// Seconds from the job's due time (run_at) to its claim, read only when
  /// metrics want it (messages/observer.hpp); negative: unknown.
  double claim_wait_seconds = -1;

  /// The memory this job holds while claimed, for the claim's byte bound.
  size_t bytes() const {
    return args.size() + metadata.size() + started_row.size() + kind.size();
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claimed_job& x) {
  return f(caf::meta::type_name("claimed_job"), x.id, x.lease, x.kind,
           x.queue, x.args, x.priority, x.attempt, x.error_count,
           x.max_attempts, x.metadata, x.deadline_ms, x.started_row,
           x.claim_wait_seconds);
}

/// Jobs of one kind that a claim left for other workers: this one has no
/// handler for the kind (a rolling deploy).
struct set_aside_jobs {
  /// The kind no handler of this worker runs.
  std::string kind;
  /// The priority of the jobs set aside.
  int32_t priority = 0;
  /// How many jobs of that kind and priority were set aside.
  int64_t count = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, set_aside_jobs& x) {
  return f(caf::meta::type_name("set_aside_jobs"), x.kind, x.priority,
           x.count);
}

/// What one claim statement returned.
struct claim_result {
  /// The claimed jobs, in claim order.
  std::vector<claimed_job> jobs;
  /// The byte bound stopped the claim before its row limit: more jobs may
  /// be due.
  bool byte_bound = false;
  /// Jobs of kinds this worker has no handler for, met by the claim and
  /// set aside for workers that have one.
  std::vector<set_aside_jobs> set_aside;
  /// The queue is paused cluster-wide (queue_controls): nothing was
  /// claimed, and jobs of it buffered here must go back unstarted.
  bool paused = false;
  /// A cluster-wide limit (global_concurrency, rate_limit) cut the claim
  /// short: more jobs may be due once a slot or the rate window frees.
  bool limited = false;
  /// When `limited` by the rate: in how many ms the window frees a start;
  /// -1 when only the concurrency limit binds (a slot frees when a job of
  /// the queue finishes, on any node).
  int64_t retry_after_ms = -1;
  /// Claim locks of the queue that another session held past
  /// defaults::claim_lock_wait, each as "priority P, held by server pid N
  /// (...)": the claim went on without the jobs behind them, and more jobs
  /// may be due there.
  std::vector<std::string> blocked_by;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, claim_result& x) {
  return f(caf::meta::type_name("claim_result"), x.jobs, x.byte_bound, x.set_aside, x.paused, x.limited, x.retry_after_ms, x.blocked_by);
}

/// How a run ended, as far as storage is concerned.
enum class outcome_kind : uint8_t {
  /// The handler succeeded: state `completed` (or the row is deleted when
  /// the completed retention is 0).
  completed,
  /// The handler failed and may run again: rescheduled after
  /// 2^(error_count + 1) seconds, or dead-lettered on its last attempt.
  retryable_failure,
  /// The handler failed for good (malformed args, unknown kind, or a
  /// terminal error): moved to the dead letter queue at once.
  terminal_failure,
  /// The run overran its deadline and was cancelled: a rescue, charged and
  /// rescheduled like a retryable failure (or dead-lettered on its last
  /// attempt), event `rescued` with reason deadline_exceeded, its
  /// follow-ups best effort after the commit.
  deadline_exceeded,
  /// The handler asked to run again after `delay_ms`: counts as a failed
  /// attempt (dead-lettered on the last one), no backoff.
  retry_after,
  /// The handler asked to run again after `delay_ms` without it counting
  /// as an attempt. Fires no event.
  snoozed,
  /// The handler cancelled the job: state `cancelled`, `message` the reason.
  cancelled,
  /// The handler parked the job until an external callback resolves it or
  /// `delay_ms` passes: state `waiting_external` with a fresh callback_id.
  waiting_callback,
  /// The run overran its deadline by the grace and its handler ignored the
  /// cancellation: the node gave up on it. A rescue: charged and
  /// rescheduled (or dead-lettered on its last attempt) like an expired
  /// lease, event `rescued` with reason deadline_exceeded, its follow-ups
  /// best effort after the commit.
  abandoned,
};

/// Renders an outcome kind for logs.
const char* to_string(outcome_kind k);

/// Why maintenance rescued a running job.
enum class rescue_reason : uint8_t {
  /// Its worker stopped refreshing the lease for the reclaim window.
  stale_heartbeat,
  /// The run passed its deadline and its worker did not end it.
  deadline_exceeded,
  /// The job waited for a callback past its timeout.
  expired_callback,
};

/// Renders a rescue reason for logs.
const char* to_string(rescue_reason r);

/// A job that a rescue pass charged and rescheduled or dead-lettered.
struct rescued_job {
  /// The rescued job's id.
  int64_t id = 0;
  /// Its kind.
  std::string kind;
  /// Its queue.
  std::string queue;
  /// Why it was rescued.
  rescue_reason reason = rescue_reason::stale_heartbeat;
  /// It was its last attempt: moved to the dead letter queue.
  bool dead_lettered = false;
  /// What was recorded as last_error_message.
  std::string message;
  /// The committed row (the dead letter row when dead-lettered), as JSON.
  std::string job_json;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rescued_job& x) {
  return f(caf::meta::type_name("rescued_job"), x.id, x.kind, x.queue,
           x.reason, x.dead_lettered, x.message, x.job_json);
}

/// The points in a job's life that hooks observe.
enum class event_type : uint8_t {
  /// The claim committed; the handler is about to run.
  started,
  /// The job parked waiting for an external callback.
  waiting_for_callback,
  /// The job completed (duration zero when a callback completed it).
  completed,
  /// The attempt failed (or asked to retry) and the job will run again.
  retried,
  /// The job ran out of attempts or failed terminally: dead-lettered.
  exhausted,
  /// The job was cancelled.
  cancelled,
  /// Maintenance rescued it (stale heartbeat, deadline, expired callback).
  rescued,
};

/// Renders an event type for logs ("completed", ...).
const char* to_string(event_type t);

/// A committed transition, on its way to the hooks of the job's kind.
struct job_event {
  /// Which transition.
  event_type type = event_type::started;
  /// The job's kind.
  std::string kind;
  /// The committed job row as a JSON object (keys = column names).
  std::string job_json;
  /// completed: how long the handler ran (0 for a callback completion).
  int64_t duration_ms = 0;
  /// retried / exhausted: the error; cancelled: the reason.
  std::string message;
  /// rescued: why.
  rescue_reason reason = rescue_reason::stale_heartbeat;
  /// The attempt the transition is about, as the retry limit counts
  /// (event::attempt); 0: derived from the row by make_event().
  int32_t attempt = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_event& x) {
  return f(caf::meta::type_name("job_event"), x.type, x.kind, x.job_json,
           x.duration_ms, x.message, x.reason, x.attempt);
}

/// Who records a run's outcome.
enum class outcome_record : uint8_t {
  /// Storage does, once the outcome reaches it: every run but a
  /// transactional handler's.
  pending,
  /// A transactional handler's run committed it, in the transaction that
  /// also committed the handler's own writes (app/registry.hpp,
  /// add_transactional): storage only reports it.
  committed,
  /// A transactional handler's run found the job no longer this worker's
  /// (released, rescued, claimed again): its transaction rolled back,
  /// nothing was written (ec::stale_run).
  stale,
};

/// The result of one run of one job.
struct job_outcome {
  /// The job the outcome is about.
  int64_t job_id = 0;
  /// The run's lease (claimed_job::lease): storage writes the outcome only
  /// while that lease still holds the job.
  int64_t lease = 0;
  /// The run's attempt (claimed_job::attempt), for its events.
  int32_t attempt = 0;
  /// What the handler decided (completed, retry, snooze, cancel, ...).
  outcome_kind kind = outcome_kind::completed;
  /// The failure message recorded as `last_error_message` (the reason for
  /// a cancel); empty on success.
  std::string message;
  /// retry_after / snoozed: the delay; waiting_callback: the timeout.
  int64_t delay_ms = 0;
  /// How long the handler ran.
  int64_t duration_ms = 0;
  /// The job's kind has hooks or follow-ups: storage reads the committed
  /// row for its event.
  bool observed = false;
  /// The job's kind and queue, for the log line of the recorded outcome.
  std::string job_kind;
  /// The job's queue.
  std::string queue;
  /// Whether a transactional handler's run recorded it already
  /// (outcome_record): storage then writes nothing.
  outcome_record record = outcome_record::pending;
  /// record == committed: the transition fires this event (its job_json
  /// empty when nobody observes the kind). Storage reports it as if it had
  /// written the outcome itself: log line, metrics, hooks.
  bool has_event = false;
  /// The event, when has_event.
  job_event event;
  /// record == committed: its park applied a callback resolution kept
  /// while the job ran, which fires this event after `event`.
  bool has_resolution = false;
  /// The resolution's event, when has_resolution.
  job_event resolution;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_outcome& x) {
  return f(caf::meta::type_name("job_outcome"), x.job_id, x.lease,
           x.attempt, x.kind, x.message, x.delay_ms, x.duration_ms,
           x.observed, x.job_kind, x.queue, x.record, x.has_event, x.event,
           x.has_resolution, x.resolution);
}

/// What storage did with an outcome.
enum class finish_result : uint8_t {
  /// The transition committed.
  applied,
  /// The run was no longer this worker's (released, rescued or deleted
  /// meanwhile): nothing was written.
  stale,
};

/// What storage did with one outcome, reported to the poller that ran the
/// job once the outcome's transaction committed (or was found stale).
struct outcome_report {
  /// The job the outcome was about.
  int64_t job_id = 0;
  /// What the handler decided.
  outcome_kind kind = outcome_kind::completed;
  /// Whether storage applied it (or found the lease gone: a stale outcome).
  finish_result result = finish_result::applied;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, outcome_report& x) {
  return f(caf::meta::type_name("outcome_report"), x.job_id, x.kind,
           x.result);
}

/// A job this node holds a lease on (claimed, running, or finished with its
/// outcome not yet committed), for heartbeats and the watchdog.
struct held_job {
  /// The job's id.
  int64_t id = 0;
  /// Its lease (claimed_job::lease).
  int64_t lease = 0;
  /// When it was claimed (actor clock, ns since its epoch): the lease is at
  /// least this fresh.
  int64_t claimed_at_ns = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, held_job& x) {
  return f(caf::meta::type_name("held_job"), x.id, x.lease,
           x.claimed_at_ns);
}

} // namespace aw
