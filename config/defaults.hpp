#pragma once
// Every default of the runtime, in one place, each with the reason for its
// value. Config structs, the TOML loader and the CLI all read these.

#include <chrono>
#include <cstdint>

namespace aw::defaults {

using namespace std::chrono_literals;

/// Database connections a node opens for claims and outcomes (plus one for
/// LISTEN). One claims, the rest commit outcomes in parallel batches. Two
/// measured fastest on 2 cores: outcomes split over more connections make
/// smaller batches and more commits (bench/results: 23.5k vs 19.0k jobs/s
/// at pool_size 2 vs 4); raise it on machines with more cores.
constexpr int pool_size = 2;

/// How often an idle poller looks for due jobs that no NOTIFY announced
/// (scheduled jobs becoming due, retries, NOTIFYs lost while disconnected).
constexpr std::chrono::milliseconds poll_interval = 1s;

/// Failed attempts before a job is dead-lettered: at most 21 runs.
constexpr int max_retries = 20;

/// How long running jobs may keep running after a shutdown signal before
/// their locks are released (the spec's default drain budget).
constexpr std::chrono::milliseconds shutdown_drain = 2s;

/// Completed rows are kept a day for inspection, then deleted.
constexpr std::chrono::milliseconds completed_retention = 24h;

/// How often maintenance deletes expired completed rows.
constexpr std::chrono::milliseconds maintenance_interval = 30s;

/// Rows deleted per maintenance statement, so one round never holds locks
/// on a huge set.
constexpr int cleanup_batch = 10000;

/// How often a node refreshes the leases of its running jobs (the spec's
/// default), and rescues expired ones cluster-wide.
constexpr std::chrono::milliseconds heartbeat_interval = 30s;

/// A running job whose lease is older than this is rescued: four missed
/// heartbeats, so one slow statement never costs a job its lease.
constexpr std::chrono::milliseconds reclaim_window = 120s;

/// The reclaim window must be at least this many heartbeat intervals: the
/// watchdog abandons a job one interval before the window closes, and one
/// more interval is margin for a slow heartbeat.
constexpr int min_heartbeats_per_window = 3;

/// Jobs rescued per statement.
constexpr int rescue_batch = 1000;

/// 0: no idle poll gate; every poller polls on its idle interval.
constexpr int idle_poll_permits = 0;

/// How long a job waits for its external callback when the handler gives
/// no timeout.
constexpr std::chrono::milliseconds callback_timeout = 1h;

/// Jobs of one queue running at once on one node.
constexpr int concurrency = 10;

/// Queue name used when none is given (also the column default).
constexpr const char* queue = "default";

/// Node name used in `locked_by` when the config gives none.
constexpr const char* node = "node";

/// How often each poller logs a summary of what it did (only when it did
/// something): per-job lines at INFO would cost more than a no-op job.
constexpr std::chrono::milliseconds report_interval = 10s;

/// Transient loop errors back off from 1 s, doubling, capped at 30 s
/// (spec: Transient Error Resilience).
constexpr std::chrono::milliseconds backoff_initial = 1s;
constexpr std::chrono::milliseconds backoff_max = 30s;

/// The channel the NOTIFY trigger and the listener share.
constexpr const char* notify_channel = "actor_worker_jobs";

/// How long the listener blocks waiting for a NOTIFY before it checks its
/// mailbox again; bounds how late it notices a shutdown.
constexpr std::chrono::milliseconds listen_wait = 200ms;

} // namespace aw::defaults
