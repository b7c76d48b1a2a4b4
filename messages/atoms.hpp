#pragma once
// Every atom the actors exchange. CAF 0.17 atoms are at most 10 characters;
// ours live in aw:: so they never clash with caf::get_atom, caf::tick_atom...

#include <caf/atom.hpp>

namespace aw {

/// Ask a storage actor to claim due jobs.
using claim_atom = caf::atom_constant<caf::atom("claim")>;
/// Record a job's outcome.
using finish_atom = caf::atom_constant<caf::atom("finish")>;
/// Put running jobs back to `available` without charging an attempt.
using release_atom = caf::atom_constant<caf::atom("release")>;
/// Delete finished jobs past their retention (and maintenance's timer for
/// it).
using cleanup_atom = caf::atom_constant<caf::atom("cleanup")>;
/// Verify the database schema before polling.
using check_atom = caf::atom_constant<caf::atom("check")>;
/// Commit buffered outcomes (a storage actor sends it to itself).
using flush_atom = caf::atom_constant<caf::atom("flush")>;
/// New work may be due: a NOTIFY arrived or this process enqueued.
using wake_atom = caf::atom_constant<caf::atom("wake")>;
/// An executor finished its job: a slot is free again.
using done_atom = caf::atom_constant<caf::atom("done")>;
/// A periodic timer fired (idle poll, backoff retry, heartbeat round).
using tick_atom = caf::atom_constant<caf::atom("tick")>;
/// Stop claiming, drain running jobs, release the rest.
using drain_atom = caf::atom_constant<caf::atom("drain")>;
/// The drain budget ran out (a poller sends it to itself).
using drained_atom = caf::atom_constant<caf::atom("drained")>;
/// A handler returned; carries the job's outcome to its executor.
using outcome_atom = caf::atom_constant<caf::atom("outcome")>;
/// Wait for the next NOTIFY (the listener sends it to itself).
using listen_atom = caf::atom_constant<caf::atom("listen")>;
/// Shut the whole runtime down gracefully.
using stop_atom = caf::atom_constant<caf::atom("stop")>;
/// Refresh the leases of running jobs.
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
/// Rescue jobs whose lease expired or whose deadline passed (and
/// maintenance's timer for it).
using rescue_atom = caf::atom_constant<caf::atom("rescue")>;
/// Which jobs are running here (asked of a poller).
using running_atom = caf::atom_constant<caf::atom("running")>;
/// These jobs are no longer ours: stop them, record nothing.
using lost_atom = caf::atom_constant<caf::atom("lost")>;
/// Stop a running job cooperatively (cancels its token): the job is no
/// longer ours, or an operator asked to cancel it.
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
/// A job's deadline passed (an executor sends it to itself).
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
/// Ask the idle poll gate for a permit.
using permit_atom = caf::atom_constant<caf::atom("permit")>;
/// Give an idle poll permit back.
using giveback_atom = caf::atom_constant<caf::atom("giveback")>;
/// Handlers of held jobs started: record it (a rescue charges only those).
using started_atom = caf::atom_constant<caf::atom("started")>;
/// An idle poll permit's turn is over: pass it on if another poller waits.
using rotate_atom = caf::atom_constant<caf::atom("rotate")>;
/// The current set of pollers (supervisor -> lease keeper).
using pollers_atom = caf::atom_constant<caf::atom("pollers")>;
/// Time to log a summary of recent activity.
using report_atom = caf::atom_constant<caf::atom("report")>;
/// Start (or restart) a supervised component.
using start_atom = caf::atom_constant<caf::atom("start")>;
/// Outcomes committed (storage -> poller).
using committed_atom = caf::atom_constant<caf::atom("committed")>;
/// Release the jobs the watchdog gave up (a poller sends it to itself).
using hand_back_atom = caf::atom_constant<caf::atom("handback")>;
/// A run overran its deadline by the grace and its handler still has not
/// returned (an executor sends it to itself).
using abandon_atom = caf::atom_constant<caf::atom("abandon")>;
/// An asynchronous handler's timer is due (an executor receives it).
using timer_atom = caf::atom_constant<caf::atom("timer")>;
/// Run this job (poller -> executor).
using run_atom = caf::atom_constant<caf::atom("run")>;
/// Vacuum the queue tables whose dead tuples passed their bound.
using vacuum_atom = caf::atom_constant<caf::atom("vacuum")>;
/// Refresh this process's row in worker_nodes.
using node_atom = caf::atom_constant<caf::atom("node")>;
/// Delete this process's row in worker_nodes (a graceful stop).
using leave_atom = caf::atom_constant<caf::atom("leave")>;
/// Read the periodic schedules' rows, or enqueue a tick (storage); the
/// periodic scheduler's load and retry.
using periodic_atom = caf::atom_constant<caf::atom("periodic")>;
/// Load the periodic schedules' rows (the scheduler sends it to itself).
using load_atom = caf::atom_constant<caf::atom("load")>;
/// Sample the queues' depth for the metrics.
using sample_atom = caf::atom_constant<caf::atom("sample")>;
/// Try to take the leader lease now (the leader resigned).
using elect_atom = caf::atom_constant<caf::atom("elect")>;
/// Give the leader lease up and stop being a candidate (a graceful stop).
using resign_atom = caf::atom_constant<caf::atom("resign")>;
/// This node became, or stopped being, the cluster's leader.
using leader_atom = caf::atom_constant<caf::atom("leader")>;
/// A queue was paused (true) or resumed (false) cluster-wide.
using pause_atom = caf::atom_constant<caf::atom("pause")>;
/// Write this node's configured queue limits into queue_controls.
using controls_atom = caf::atom_constant<caf::atom("controls")>;

} // namespace aw
