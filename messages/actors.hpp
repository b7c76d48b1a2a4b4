#pragma once
// Every actor interface of the runtime, in one place: read this file and you
// know who talks to whom. Handlers marked "internal" are messages an actor
// only sends to itself.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/atoms.hpp"
#include "messages/job.hpp"

namespace aw {

/// Owns one database connection; the only actor that runs SQL. Runs
/// detached: libpqxx blocks, CAF's cooperative workers must not.
using storage_actor = caf::typed_actor<
  // Claims up to `limit` due jobs of `queue` in one statement; jobs without
  // a deadline of their own get the queue's default (ms, 0 = none).
  caf::replies_to<claim_atom, std::string, int32_t, int64_t>::with<std::vector<claimed_job>>,
  // Records an outcome. Outcomes are buffered and committed in batches; the
  // reply comes after the commit.
  caf::replies_to<finish_atom, job_outcome>::with<finish_result>,
  // Releases running jobs of this worker without charging an attempt;
  // replies with the number released. Buffered outcomes commit first.
  caf::replies_to<release_atom, std::vector<int64_t>>::with<int64_t>,
  // Deletes finished jobs past their retention; replies with the count.
  caf::replies_to<cleanup_atom>::with<int64_t>,
  // Verifies every table and column the runtime's queries use.
  caf::replies_to<check_atom>::with<bool>,
  // Refreshes the leases of these running jobs in one statement; replies
  // with the ids still ours (the rest were reclaimed, released or gone).
  caf::replies_to<heartbeat_atom, std::vector<int64_t>>::with<std::vector<int64_t>>,
  // Rescues, cluster-wide, running jobs whose lease is older than the
  // reclaim window or whose deadline passed; safe on many nodes at once.
  caf::replies_to<rescue_atom>::with<std::vector<rescued_job>>,
  // internal: commit the buffered outcomes.
  caf::reacts_to<flush_atom>>;

/// Claims jobs for one queue and spawns an executor per job, never more
/// than the queue's free slots.
using poller_actor = caf::typed_actor<
  // Work may be due: claim now if there is capacity.
  caf::reacts_to<wake_atom>,
  // An executor finished job `id` with an outcome of this kind, and storage
  // recorded it (or found it stale): its slot is free.
  caf::reacts_to<done_atom, int64_t, outcome_kind, finish_result>,
  // internal: idle poll or backoff timer of generation `gen`.
  caf::reacts_to<tick_atom, uint64_t>,
  // internal: claim with whatever capacity is free once the mailbox drained.
  caf::reacts_to<claim_atom>,
  // Stop claiming, wait up to the drain budget, release what still runs.
  // Replies with the number of jobs released.
  caf::replies_to<drain_atom>::with<int64_t>,
  // internal: the drain budget ran out.
  caf::reacts_to<drained_atom>,
  // internal: log what happened since the last report.
  caf::reacts_to<report_atom>,
  // The running jobs and when each was claimed (actor clock, ns since its
  // epoch), for heartbeats and the watchdog.
  caf::replies_to<running_atom>::with<std::vector<int64_t>, std::vector<int64_t>>,
  // These jobs are no longer ours (`reason` says why): cancel them, record
  // no outcome, and never release them.
  caf::reacts_to<lost_atom, std::vector<int64_t>, std::string>,
  // The idle poll gate granted a permit: poll on the idle interval.
  caf::reacts_to<permit_atom>>;

/// Runs one job: hands it to the blocking pool, reports the outcome to
/// storage, then tells its poller the slot is free.
using executor_actor = caf::typed_actor<
  // The handler returned (sent from a pool thread).
  caf::reacts_to<outcome_atom, job_outcome>,
  // The job is no longer ours: cancel the handler, record nothing.
  caf::reacts_to<cancel_atom, std::string>,
  // internal: the run's deadline passed.
  caf::reacts_to<deadline_atom>>;

/// Keeps this node's leases alive and rescues expired ones cluster-wide.
/// Every heartbeat_interval it refreshes all running jobs of the node in
/// one statement, tells pollers about jobs that are no longer ours, and
/// abandons jobs whose lease it could not refresh before the reclaim window
/// closes (the watchdog), so two workers never both believe they own a job.
using lease_keeper_actor = caf::typed_actor<
  // internal: heartbeat, watchdog and rescue round.
  caf::reacts_to<tick_atom>,
  // The pollers whose jobs to keep alive (sent after every (re)spawn).
  caf::reacts_to<pollers_atom, std::vector<poller_actor>>>;

/// Runs the lifecycle hooks of committed transitions, one event at a time,
/// on a thread of its own: hooks never block executors or the claim path.
using hook_dispatcher_actor = caf::typed_actor<
  // A transition committed.
  caf::reacts_to<job_event>>;

/// Limits how many pollers of a process poll on the idle interval.
using poll_gate_actor = caf::typed_actor<
  // A poller asks for a permit; the gate sends `permit_atom` to it when
  // one is free (at once, or when another poller gives one back).
  caf::reacts_to<permit_atom, poller_actor>,
  // A poller gives its permit back (it found work, or stops).
  caf::reacts_to<giveback_atom, poller_actor>>;

/// Deletes finished jobs past their retention on a timer.
using maintenance_actor = caf::typed_actor<
  // internal: time for the next round.
  caf::reacts_to<tick_atom>>;

/// Holds the LISTEN connection and turns NOTIFYs into wake-ups.
using listener_actor = caf::typed_actor<
  // internal: wait (briefly) for the next notification.
  caf::reacts_to<listen_atom>>;

/// Starts the components once the schema check passes, routes wake-ups to
/// the pollers, restarts crashed components with backoff, and shuts down
/// in order.
using supervisor_actor = caf::typed_actor<
  // Graceful shutdown: drain every poller, flush storage, stop. Replies
  // with the number of jobs released.
  caf::replies_to<stop_atom>::with<int64_t>,
  // Wake the pollers of `queue` (empty = every queue).
  caf::reacts_to<wake_atom, std::string>,
  // internal: check the schema, then start the components.
  caf::reacts_to<start_atom>,
  // internal: restart the crashed component `name` ("poller:QUEUE",
  // "listener", "maintenance").
  caf::reacts_to<start_atom, std::string>>;

} // namespace aw
