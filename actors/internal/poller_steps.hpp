#pragma once
// The steps of the poller (actors/poller.hpp) that its sources share:
//
//   actors/poller.cpp         the behaviour: one handler per message, each
//                             a named function of the poller
//   actors/poller_jobs.cpp    the jobs: starting buffered jobs, recording
//                             outcomes, cancelling, handing back, the drain
//   actors/poller_claims.cpp  the claims, the idle poll gate, pause and
//                             resume
//
// Internal to aw_actors: not installed.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "actor_worker/actors/poller.hpp"

namespace aw::poller_steps {

// -- timers and leases (actors/poller_jobs.cpp) -------------------------------

/// Arms the poller's timer (tick_atom) `delay` from now; older arms
/// become stale.
void arm_timer(poller_pointer self, std::chrono::milliseconds delay);

/// A held job as the lease keeper and storage take it: the claim time
/// in nanoseconds since the epoch.
held_job held(int64_t id, int64_t lease, caf::actor_clock::time_point at);

/// The storage actor of `n` that records the outcome of job `id`: by the
/// id's receipt bucket (64 ids, storage/sql/functions/
/// actor_worker_complete.sql), so that a bucket's completions go to one
/// storage actor and share receipt rows, and the `jobs` view meets one
/// receipt per completed job, not one per storage actor.
size_t completer_of(int64_t id, size_t n);

/// Hands the collected outcomes to storage, one message per storage actor.
void flush_outbox(poller_pointer self);

// -- the drain (actors/poller_jobs.cpp) --------------------------------------

/// Releases `jobs` (never charged); a drain waits for the reply.
void release_jobs(poller_pointer self, std::vector<held_job> jobs,
                  bool started);

/// Releases the jobs the watchdog gave up, once the database answers: a
/// failed try is tried again a heartbeat interval later. A rescue that took
/// them meanwhile wins (the release is guarded by the lease).
void hand_back(poller_pointer self);

/// The buffered jobs go back at once: they never started.
void release_buffer(poller_pointer self);

/// The drain budget ran out: stops the executors still running and
/// releases their jobs.
void expire_drain(poller_pointer self);

/// The drain budget ran out while claims were in flight: once the last is
/// back (its jobs handed back unstarted), release the running jobs.
void expire_if_overdue(poller_pointer self);

/// Answers the drain request once nothing runs, no claim is in flight and
/// every release got its reply.
void maybe_finish_drain(poller_pointer self);

// -- running jobs (actors/poller_jobs.cpp) -----------------------------------

/// Starts buffered jobs while handler slots are free.
void start_jobs(poller_pointer self);

/// Queues `outcome` of a job this poller holds for storage; the job stays
/// leased (committing) until storage reports the commit.
void record_outcome(poller_pointer self, job_outcome outcome,
                    started_job job);

/// An operator asked to cancel `ids` (`jobs cancel`): a buffered job ends
/// cancelled without running; a running one is cancelled through its
/// handler's token. Ids this poller does not hold are someone else's.
void cancel_on_request(poller_pointer self, const std::vector<int64_t>& ids);

// -- the idle poll gate (actors/poller_claims.cpp) ---------------------------

/// Asks the gate for a permit (once) when this poller has none.
void want_permit(poller_pointer self);

/// Gives the permit back: this poller found work and need not poll idly.
void give_back_permit(poller_pointer self);

/// Arms the idle poll timer, if this poller may poll idly.
void arm_idle_timer(poller_pointer self);

// -- pause and resume (actors/poller_claims.cpp) -----------------------------

/// The queue was paused: claim nothing more, hand the buffered jobs back
/// unstarted (never charged), let running jobs finish, and ask again every
/// poll_interval whether the pause holds.
void enter_pause(poller_pointer self, const char* how);

/// The queue was resumed: claim at once.
void leave_pause(poller_pointer self, const char* how);

/// Asks storage, with a claim of no jobs, whether the queue is paused (a
/// paused queue says so whatever the limit).
void probe_pause(poller_pointer self);

// -- claims (actors/poller_claims.cpp) ---------------------------------------

/// Sends claims while the poller runs unpaused, no claim is queued or
/// backing off, fewer than claims_in_flight are out and claim_room leaves
/// room.
void try_claim(poller_pointer self);

/// Claims once the messages already in the mailbox (more finished jobs,
/// more wake-ups) have been handled, so a burst becomes one claim.
void schedule_claim(poller_pointer self);

} // namespace aw::poller_steps
