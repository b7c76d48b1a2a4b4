#pragma once
// What a node tells whoever watches it (metrics, health probes), as one
// small interface the actors call. The actors know nothing of Prometheus or
// HTTP: app/prometheus_observer.hpp implements this for /metrics and the
// probes; a node without an observer (the default) pays one null check per
// call site.
//
// Every method is called from actor threads (several storage actors and
// pollers at once), must be thread-safe, must not block on I/O and must
// not throw. The defaults ignore the call.

#include <cstdint>
#include <string>
#include <vector>

#include "actor_worker/messages/job.hpp"

namespace aw {

/// Where a recorded outcome took its job: the `outcome` label of
/// actor_worker_job_executions_total.
enum class execution_result : uint8_t {
  completed,
  /// Failed, will run again (backoff, retry_after, deadline, abandoned).
  retried,
  dead_lettered,
  cancelled,
  snoozed,
  /// Parked waiting for an external callback.
  parked,
  /// Not recorded: the run was no longer this worker's (its lease was
  /// lost, or an operator finished it meanwhile).
  lost,
};

/// Renders an execution result as its label value.
const char* to_string(execution_result r);

/// One queue's live jobs by state, as one sample of the database.
struct queue_sample {
  /// The queue sampled.
  std::string queue;
  /// Jobs per state: available (due), scheduled (not due yet), running,
  /// waiting_external, dead_lettered.
  int64_t available = 0;
  /// Jobs not due yet.
  int64_t scheduled = 0;
  /// Jobs running.
  int64_t running = 0;
  /// Jobs parked waiting for a callback.
  int64_t waiting_external = 0;
  /// Dead letters of the queue.
  int64_t dead_lettered = 0;
  /// Of the available jobs, those whose kind no live process runs in this
  /// queue (worker_nodes): they wait until one starts.
  int64_t unserved = 0;
  /// Seconds since the oldest due available job became due; 0 when none.
  double oldest_available_age_seconds = 0;
};

/// What storage::queue_samples() reads: every queue with live jobs or dead
/// letters.
using queue_samples = std::vector<queue_sample>;

/// Receives what the runtime does (health, jobs, claims, queue samples) for metrics; every method has a no-op default. aw::prometheus_observer is the one the binary uses.
class observer {
public:
  virtual ~observer() = default;

  // -- health --------------------------------------------------------------

  /// A statement reached the database (true) or could not (false).
  virtual void database_reachable(bool) {}
  /// The schema check passed (true) or found the schema out of date.
  virtual void schema_checked(bool) {}
  /// The node stopped claiming: it drains and will stop.
  virtual void draining() {}
  /// The node became the cluster's leader (true) or stopped being it.
  /// Only the leader samples the queues' depth (sampled()).
  virtual void leadership(bool) {}

  // -- jobs ----------------------------------------------------------------

  /// True when started() wants the time each job waited since it became
  /// due: storage then reads the jobs' run_at after each claim (one more
  /// statement per claim).
  virtual bool wants_wait_times() const {
    return false;
  }
  /// A claim of `queue` returned `jobs` jobs.
  virtual void claimed(const std::string& /*queue*/, size_t /*jobs*/) {}
  /// A handler started. `wait_seconds`: since the job became due (run_at),
  /// or negative when unknown.
  virtual void started(const std::string& /*queue*/,
                       const std::string& /*kind*/, double /*wait_seconds*/) {
  }
  /// An outcome committed (or was found stale: lost).
  virtual void recorded(const job_outcome& /*outcome*/, execution_result) {}
  /// Maintenance rescued a job of any node.
  virtual void rescued(const rescued_job&) {}
  /// A statement of `operation` (claim, finish, heartbeat, rescue, ...)
  /// failed.
  virtual void database_error(const char* /*operation*/) {}
  /// `failures` hooks of `kind` threw.
  virtual void hooks_failed(const std::string& /*kind*/, int /*failures*/) {}
  /// Follow-ups could not be enqueued: `stage` "outcome" (the outcome was
  /// recorded as a retry instead), "rescue" (the rescue stands) or
  /// "exhausted" (the dead letter stands).
  virtual void follow_ups_failed(const char* /*stage*/) {}
  /// This node's handler slots of `queue`: running now, and the
  /// concurrency.
  virtual void slots(const std::string& /*queue*/, int /*running*/,
                     int /*concurrency*/) {}
  /// A fresh sample of the queues' depth.
  virtual void sampled(const queue_samples&) {}
};

} // namespace aw
