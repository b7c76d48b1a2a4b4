#pragma once
// Every actor interface of the runtime, in one place: read this file and you
// know who talks to whom.
//
// An actor that sends itself messages (timers, deferred work) has two
// types: `X_actor`, the handle every other actor holds, and `X_internal`,
// which adds the messages only X sends to itself and which only X's own
// behaviour uses. Sending an internal message to an `X_actor` does not
// compile. An actor that takes no message from others at all has an
// `opaque_actor` for a handle.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actor_worker/messages/atoms.hpp"
#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/periodic_schedule.hpp"

namespace aw {

/// The handle of an actor that takes no message from other actors (CAF
/// 0.17 has no empty `typed_actor<>`): enough to link to it, stop it and
/// recognise its exit, never to send it anything.
using opaque_actor = caf::strong_actor_ptr;

/// Claims jobs for one queue into a bounded local buffer and starts an
/// executor per job as handler slots free up (at most the queue's
/// concurrency at once). How many jobs a claim takes depends on the buffer,
/// not on the concurrency.
using poller_actor = caf::typed_actor<
  // Work may be due: claim now if the buffer has room.
  caf::reacts_to<wake_atom>,
  // The handler of job `id` returned and its executor is free again.
  // `record`: the outcome goes to storage (a `committed` report follows);
  // false when the job was no longer ours and nothing is recorded.
  caf::reacts_to<done_atom, int64_t, bool, job_outcome>,
  // Storage committed these outcomes of jobs this poller ran (or found
  // them stale): their leases are over.
  caf::reacts_to<committed_atom, std::vector<outcome_report>>,
  // Stop claiming, release the buffered jobs, wait up to the drain budget
  // for running ones, release what still runs. Replies with the number of
  // jobs released.
  caf::replies_to<drain_atom>::with<int64_t>,
  // Every job this poller holds a lease on (buffered, running, or waiting
  // for its outcome to commit), for heartbeats and the watchdog.
  caf::replies_to<running_atom>::with<std::vector<held_job>>,
  // These jobs are no longer ours (`reason` says why): cancel their
  // handlers, drop them from the buffer, record no outcome. `hand_back`:
  // the database may still count them as ours (the watchdog gave them up
  // while it did not answer), so the poller releases them once it answers
  // again (a live worker never keeps jobs it no longer runs); otherwise
  // another worker holds them and they are never released.
  caf::reacts_to<lost_atom, std::vector<int64_t>, std::string, bool>,
  // An operator asked to cancel these jobs (`actor-worker jobs cancel`);
  // any of them may be another poller's or node's. Those this poller
  // holds end cancelled: a buffered one at once, without running, a
  // running one through its handler's token (see executor_actor).
  caf::reacts_to<cancel_atom, std::vector<int64_t>>,
  // The idle poll gate granted a permit: poll on the idle interval.
  caf::reacts_to<permit_atom>,
  // The queue was paused (true: claim nothing, release the buffered jobs
  // unstarted, let running ones finish) or resumed (false: claim at once).
  // Sent on the queue-controls NOTIFY; a claim reports a pause too.
  caf::reacts_to<pause_atom, bool>>;

/// What only the poller sends itself.
using poller_internal = poller_actor::extend<
  // Hand the outcomes collected since the last flush to storage, one
  // message per storage actor.
  caf::reacts_to<flush_atom>,
  // Record the starts of the jobs started since the last time that still
  // run (defaults::start_record_delay after the first of them).
  caf::reacts_to<started_atom>,
  // Idle poll, quick re-claim or backoff timer of generation `gen`.
  caf::reacts_to<tick_atom, uint64_t>,
  // Claim with whatever room is free once the mailbox drained.
  caf::reacts_to<claim_atom>,
  // The drain budget ran out.
  caf::reacts_to<drained_atom>,
  // Try again to release the jobs the watchdog gave up.
  caf::reacts_to<hand_back_atom>,
  // Log what happened since the last report.
  caf::reacts_to<report_atom>>;

/// Owns one database connection; the only actor that runs SQL. Runs
/// detached: libpqxx blocks, CAF's cooperative workers must not.
using storage_actor = caf::typed_actor<
  // Claims up to `limit` due jobs of `queue` whose args take at most
  // `max_bytes` (but at least one job), in one statement; jobs without a
  // deadline of their own get the queue's default (ms, 0 = none). When
  // `awaited` (handlers stand idle for these jobs), the claim answers
  // before the outcomes waiting on the connection commit; otherwise they
  // commit with it, in one round trip.
  caf::replies_to<claim_atom, std::string, int32_t, int64_t, int64_t, bool>::with<claim_result>,
  // Records outcomes of jobs `poller` ran. Outcomes are buffered and
  // committed in batches; after each commit the poller gets one
  // `committed` report for all of its outcomes in it.
  caf::reacts_to<finish_atom, std::vector<job_outcome>, poller_actor>,
  // Releases jobs of this worker without charging an attempt (`started`:
  // their handlers ran, so the attempt still counts as started); replies
  // with the number released. Buffered outcomes commit first, so an empty
  // list is a flush.
  caf::replies_to<release_atom, std::vector<held_job>, bool>::with<int64_t>,
  // The handlers of these jobs started (a few at a time, a moment after
  // they did): recorded so a rescue of this worker charges them and gives
  // back uncharged the jobs it only buffered. Best effort: a job whose
  // start is not recorded goes back uncharged once and has its start
  // recorded by its next claim (migrations/002_job_starts.sql).
  caf::reacts_to<started_atom, std::vector<held_job>>,
  // Deletes finished jobs past their retention; replies with the count.
  caf::replies_to<cleanup_atom>::with<int64_t>,
  // Vacuums the queue tables whose dead tuples passed their bound; replies
  // with the tables vacuumed.
  caf::replies_to<vacuum_atom>::with<std::vector<std::string>>,
  // Verifies every table and column the runtime's queries use.
  caf::replies_to<check_atom>::with<bool>,
  // The leases of the jobs this node holds (claimed_job::lease, one per
  // job): replies with the leases still its own (a rescue took the others
  // back).
  caf::replies_to<heartbeat_atom, std::vector<int64_t>>::with<std::vector<int64_t>>,
  // Which of these jobs (held by this node) an operator asked to cancel:
  // the durable side of `jobs cancel`, for a NOTIFY that was missed.
  caf::replies_to<cancel_atom, std::vector<int64_t>>::with<std::vector<int64_t>>,
  // Rescues, cluster-wide, jobs whose lease is older than the reclaim
  // window and callbacks that timed out; safe on many nodes at once.
  caf::replies_to<rescue_atom>::with<std::vector<rescued_job>>,
  // Samples every queue's depth by state for the node's observer (metrics);
  // replies with the number of queues sampled.
  caf::replies_to<sample_atom>::with<int64_t>,
  // Inserts or refreshes this process's row in worker_nodes with the number
  // of jobs it holds; a candidate (true) also takes the leader lease when
  // it is free or expired, or renews its own. Replies whether this process
  // is the cluster's leader now.
  caf::replies_to<node_atom, int64_t, bool>::with<bool>,
  // Gives the leader lease up if this process holds it and NOTIFYs the
  // other candidates (a graceful stop); replies whether it held it.
  caf::replies_to<resign_atom>::with<bool>,
  // Deletes this process's row in worker_nodes (a graceful stop).
  caf::replies_to<leave_atom>::with<bool>,
  // Writes this node's configured global_concurrency and rate_limit of the
  // queues it serves into queue_controls (before the pollers start);
  // replies with one line per limit it changed.
  caf::replies_to<controls_atom>::with<std::vector<std::string>>,
  // Every row of periodic_schedules.
  caf::replies_to<periodic_atom>::with<std::vector<periodic_row>>,
  // Takes this tick of its schedule and enqueues its job, in one
  // transaction: replies with the job's id, or 0 when another scheduler
  // took the tick (or a later one) first.
  caf::replies_to<periodic_atom, periodic_tick>::with<int64_t>>;

/// What only a storage actor sends itself.
using storage_internal = storage_actor::extend<
  // Commit the buffered outcomes (sent with the first outcome of a batch,
  // or after a backoff).
  caf::reacts_to<flush_atom>>;

/// Runs the jobs of one handler slot of a poller, one at a time: starts
/// each job's handler through the job runner (inline, asynchronous, or on
/// the blocking pool) and gives the outcome back to the poller, which frees
/// the slot and passes outcomes on to storage in batches. Executors are
/// reused from job to job, so a job costs no actor creation; messages of an
/// earlier run carry that run's number and are ignored.
using executor_actor = caf::typed_actor<
  // Run this job.
  caf::reacts_to<run_atom, claimed_job>,
  // Job `id` is no longer ours: cancel its handler, record nothing.
  caf::reacts_to<cancel_atom, int64_t, std::string>,
  // An operator asked to cancel job `id`: cancel its handler's token; the
  // run ends cancelled whatever the handler returns, unless it completed
  // (then it stays completed, with a warning: the work was done).
  caf::reacts_to<cancel_atom, int64_t>>;

/// What only the executor sends itself (its handlers' completions and
/// timers, from whatever thread they run on, and its deadline timers).
using executor_internal = executor_actor::extend<
  // The handler of run `run` returned.
  caf::reacts_to<outcome_atom, uint64_t, job_outcome>,
  // The deadline of run `run` passed.
  caf::reacts_to<deadline_atom, uint64_t>,
  // The deadline of run `run` passed a grace ago and its handler ignores
  // the cancellation: record the overrun, leave the handler behind.
  caf::reacts_to<abandon_atom, uint64_t>,
  // An asynchronous handler's timer `id` of run `run` is due.
  caf::reacts_to<timer_atom, uint64_t, uint64_t>>;

/// Keeps this node's leases alive. Every heartbeat_interval it refreshes
/// the node's lease (one statement: the node's row) and tells
/// pollers about jobs that are no longer ours, and abandons jobs whose
/// lease it could not refresh before the reclaim window closes (the
/// watchdog), so two workers never both believe they own a job. Rescuing
/// expired leases, cluster-wide, is maintenance's work.
using lease_keeper_actor = caf::typed_actor<
  // The pollers whose jobs to keep alive (sent after every (re)spawn).
  caf::reacts_to<pollers_atom, std::vector<poller_actor>>,
  // The leader resigned (a NOTIFY on the leader channel): try to take the
  // lease now instead of at the next round.
  caf::reacts_to<elect_atom>,
  // The node stops: no longer a candidate; gives the lease up if held.
  // Replies whether it was held.
  caf::replies_to<resign_atom>::with<bool>>;

/// What only the lease keeper sends itself.
using lease_keeper_internal = lease_keeper_actor::extend<
  // Heartbeat and watchdog round.
  caf::reacts_to<tick_atom>>;

/// Runs the lifecycle hooks of committed transitions, one event at a time,
/// on a thread of its own: hooks never block executors or the claim path.
using hook_dispatcher_actor = caf::typed_actor<
  // A transition committed (or, for `started`, a handler started).
  caf::reacts_to<job_event>>;

/// Limits how many pollers of a process poll on the idle interval.
using poll_gate_actor = caf::typed_actor<
  // A poller asks for a permit; the gate sends `permit_atom` to it when
  // one is free (at once, or when another poller gives one back).
  caf::reacts_to<permit_atom, poller_actor>,
  // A poller gives its permit back (it found work, or stops).
  caf::reacts_to<giveback_atom, poller_actor>,
  // A permit holder's idle interval is up: the gate hands its permit to
  // the longest waiting poller and queues it behind the others, or, when
  // none waits, sends it `permit_atom` again (its turn to poll). So every
  // parked poller polls at least every poll_interval x ceil(pollers /
  // permits), and the permits still make one idle poll per interval each.
  caf::reacts_to<rotate_atom, poller_actor>>;

/// Housekeeping of the whole cluster's tables, on timers, over a connection
/// of its own: rescues jobs whose lease expired (on any node), whose
/// deadline passed or whose callback timed out; deletes finished jobs past
/// their retention and keeps the queue tables vacuumed. Nothing else sends
/// it anything.
using maintenance_actor = opaque_actor;

/// What only maintenance sends itself.
using maintenance_internal = caf::typed_actor<
  // Time for the next cleanup round (retention deletes, then vacuums).
  caf::reacts_to<cleanup_atom>,
  // Time for the next rescue.
  caf::reacts_to<rescue_atom>,
  // Time for the next sample of the queues' depth (metrics).
  caf::reacts_to<sample_atom>>;

/// Enqueues the ticks of the [periodic.NAME] schedules, each exactly once
/// across the cluster, waking at the next tick. Spawned by maintenance and
/// linked to it: it runs where and while maintenance runs. Nothing else
/// sends it anything.
using periodic_actor = opaque_actor;

/// What only the periodic scheduler sends itself.
using periodic_internal = caf::typed_actor<
  // Read the schedules' rows (at start, and again after a failed enqueue).
  caf::reacts_to<load_atom>,
  // The timer of generation `gen`: enqueue what is due, sleep until the
  // next tick.
  caf::reacts_to<tick_atom, uint64_t>>;

/// Holds the LISTEN connection and turns NOTIFYs into wake-ups (and
/// cancel requests of `jobs cancel`, pauses and resumes of `queues`).
/// Nothing else sends it anything.
using listener_actor = opaque_actor;

/// What only the listener sends itself.
using listener_internal = caf::typed_actor<
  // Wait (briefly) for the next notification.
  caf::reacts_to<listen_atom>>;

/// Starts the components once the schema check passes, routes wake-ups to
/// the pollers, restarts crashed components with backoff, and shuts down
/// in order.
/// Whoever acts on this node's leadership: told `true` when the node
/// becomes the cluster's leader, `false` when it stops being it (and once
/// at start, whichever it is).
using leadership_actor = caf::typed_actor<caf::reacts_to<leader_atom, bool>>;

using supervisor_actor = caf::typed_actor<
  // Graceful shutdown: drain every poller, flush storage, stop. Replies
  // with the number of jobs released.
  caf::replies_to<stop_atom>::with<int64_t>,
  // Wake the pollers of `queue` (empty = every queue).
  caf::reacts_to<wake_atom, std::string>,
  // An operator asked to cancel job `id` (a NOTIFY on the cancel
  // channel): tell every poller; the one holding it cancels it.
  caf::reacts_to<cancel_atom, int64_t>,
  // The leader resigned (a NOTIFY on the leader channel): the lease
  // keeper tries to take the lease at once.
  caf::reacts_to<elect_atom>,
  // This node became the cluster's leader (true: start maintenance) or
  // stopped being it (false: stop it). From the lease keeper.
  caf::reacts_to<leader_atom, bool>,
  // Queue `queue` was paused (true) or resumed (false) (a NOTIFY on the
  // queue-controls channel): tell its pollers.
  caf::reacts_to<pause_atom, std::string, bool>>;

/// What only the supervisor sends itself.
using supervisor_internal = supervisor_actor::extend<
  // Check the schema, then start the components.
  caf::reacts_to<start_atom>,
  // Restart the crashed component `name` ("poller:QUEUE", "listener",
  // "maintenance", "lease_keeper").
  caf::reacts_to<start_atom, std::string>>;

} // namespace aw
