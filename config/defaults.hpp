#pragma once
// Every default of the runtime, in one place, each with the reason for its
// value. Config structs, the TOML loader and the CLI all read these.

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace aw::defaults {

using namespace std::chrono_literals;

/// Database connections a node opens for claims and outcomes (plus one for
/// LISTEN). Each claims and records outcomes (a claim commits the outcomes
/// waiting on its connection in the same statement), and a queue keeps up
/// to two claims in flight on different connections, so one claim's round
/// trip hides behind the other's. Two measured fastest on 2 cores
/// (bench/results); more connections make smaller batches and more commits.
constexpr int pool_size = 2;

/// Connections a node opens, per database and on demand, for the
/// transactions of transactional handlers (registry::add_transactional):
/// apart from pool_size, so a slow handler transaction never delays a claim,
/// an outcome or a heartbeat. At most this many such transactions are open
/// at once; runs beyond wait their turn. Eight keeps a concurrency-10 queue
/// nearly busy (a run holds its connection only while its transaction is
/// open) without taking much of PostgreSQL's default 100 connections.
constexpr int transactional_pool_size = 8;

/// Transactional runs of one queue that share a transaction
/// ([queues.NAME] transactional_group): each handler in a savepoint of its
/// own, all their outcomes and follow-ups in one commit. One commit per
/// job is what made transactional handlers slow (a COMMIT's WAL flush and
/// round trips); sharing it is how PostgreSQL itself gets its throughput.
/// 1: a transaction per run. Chosen from bench/transactional.sh
/// (docs/transactional.md has the figures).
constexpr int transactional_group = 32;

/// How long, at most, a transactional run waits for a group of its queue
/// to fill while another group of the queue is open (a connection being
/// free): the runs that become ready meanwhile share a commit, and a run
/// never waits long behind a slow group (a handler that sleeps or waits
/// for a lock). Measured (record_tx, concurrency 64): 2 ms made groups
/// half as large (0.077 commits per job against 0.038) and the drain 19%
/// slower; 10 ms drains as fast as waiting for the open group to end.
constexpr std::chrono::milliseconds transactional_group_gather = 10ms;

/// While a group of a queue is open, the next opens at once when this
/// share of the queue's concurrency waits (1 / divisor; at most a full
/// transactional_group, at least 2 runs): at concurrency 10 no group of 32
/// ever fills, and runs waited for the open group to end, each drain a
/// chain of one commit after another. Measured (bench/transactional.sh's
/// kinds, group 32): at concurrency 10, half (5 runs) drained 1.6-1.7 x
/// faster than waiting for the group to end, a third (3) 1.2-1.3 x; at
/// concurrency 64 a quarter (16) was slower than half (32, the group).
constexpr int transactional_group_overlap_divisor = 2;

/// Bytes of args a transactional run parses on its executor's scheduler
/// thread, without a hand-off (registry::start_transactional): larger ones
/// are parsed on a blocking thread first, as a blocking handler's are, so
/// a 10 MB document never holds an actor thread. (Parsing 64 KiB takes
/// well under a millisecond.)
constexpr size_t inline_args_parse_limit = 64 * 1024;

/// The largest transactional_group. Each handler that writes in a group
/// takes a subtransaction id, and PostgreSQL keeps at most 64 of one
/// transaction in shared memory: past that, every snapshot in the server
/// must look subtransactions up on disk (a "suboverflowed" snapshot).
constexpr int max_transactional_group = 64;

/// How long a statement of a handler in a group (transactional_group > 1)
/// may wait for a lock held by another transaction before it fails; the
/// run then rolls back to its savepoint and runs again in a transaction of
/// its own, without the limit and without being charged an attempt. A
/// group waiting on another group's lock holds every run of it up; a short
/// wait bounds that, and two groups can never deadlock each other for
/// longer.
constexpr std::chrono::milliseconds transactional_group_lock_timeout = 200ms;

/// The longest a transactional handler's transaction may stay open (its
/// statements and the pauses between them); shorter when the job's
/// deadline or lease leaves less. A transaction holds its job's row lock
/// and a connection of the transactional pool: half a minute is ample for
/// the SQL of a job, and short enough that a handler that hangs lets go.
constexpr std::chrono::milliseconds transaction_timeout = 30s;

/// What sits between the worker and PostgreSQL: "none" (direct
/// connections: statements are prepared once per connection, LISTEN wakes
/// idle pollers). Set "transaction" behind PgBouncer in transaction mode.
constexpr const char* pooler = "none";

/// The name of the [database] section among a node's databases: a queue
/// not mapped to a [databases.NAME] lives there, and `--database default`
/// names it.
constexpr const char* database_name = "default";

/// The least a stopping leader waits for its resignation to commit (it
/// waits up to shutdown_drain otherwise): enough for a healthy database,
/// so the NOTIFY hands over at once even with shutdown_drain = "0"; past
/// it the lease simply expires.
constexpr std::chrono::milliseconds min_resign_wait{500};

/// Claims a queue's poller keeps in flight at once (on different
/// connections): claims of one lane take turns on its cursor in the
/// database, but their round trips and the parsing of their rows overlap.
constexpr int claims_in_flight = 2;

/// How often an idle poller looks for due jobs that no NOTIFY announced
/// (scheduled jobs becoming due, retries, NOTIFYs lost while disconnected).
constexpr std::chrono::milliseconds poll_interval = 1s;

/// The longest duration any setting, flag or job option accepts (36,500
/// days). Timers count nanoseconds from the clock's epoch, which overflow
/// some 292 years out; a bound far below that keeps every deadline, timer
/// and `now() + interval` representable, and no queue waits a century.
constexpr std::chrono::milliseconds max_duration = 36'500 * 24h;

/// The largest configuration file read (a cluster file of many nodes fits
/// many times over); anything larger is refused rather than read whole.
constexpr size_t max_config_bytes = 1024 * 1024;

/// The longest kind or queue name, in bytes: names are identifiers shown in
/// logs, tables and metrics, not payloads.
constexpr size_t max_name_length = 200;

/// The deepest nesting of arrays and objects in JSON the CLI reads (job
/// args, metadata, --jsonl lines, callback payloads), as toml++ caps a
/// configuration's (TOML_MAX_NESTED_VALUES): the JSON parser recurses per
/// level, and 100,000 levels overflow the stack. Real args are a few deep.
constexpr size_t max_json_depth = 256;

/// From this many plain jobs on (no option but queue and priority),
/// enqueue_many writes them with COPY rather than one INSERT: COPY is the
/// fastest way into PostgreSQL, but it costs one round trip more (the ids
/// come from the sequence first, as COPY returns none).
constexpr size_t copy_threshold = 500;

/// The largest max_attempts a job may have (and the bound of its attempt
/// and error counters in the schema, jobs_counters_bounded), far
/// from integer overflow.
constexpr int max_attempts_limit = 1'000'000;

/// Failed attempts before a job is dead-lettered: at most 21 runs.
constexpr int max_retries = 20;

/// How long running jobs may keep running after a shutdown signal before
/// their locks are released (the spec's default drain budget).
constexpr std::chrono::milliseconds shutdown_drain = 2s;

/// Completed rows are kept a day for inspection, then deleted.
constexpr std::chrono::milliseconds completed_retention = 24h;

/// Dead letters are kept until an operator retries or purges them (0 =
/// keep forever): a dead letter is a job that needs a decision, and one
/// deleted unseen is a job lost without a trace. Set a retention where
/// nobody looks at the queue and it must not grow without bound.
constexpr std::chrono::milliseconds dead_letter_retention{0};

/// How often maintenance deletes expired finished rows and checks the
/// queue tables' dead tuples.
constexpr std::chrono::milliseconds maintenance_interval = 10s;

/// Maintenance vacuums a small queue table (worker_nodes, queue_controls,
/// jobs_unique ...: storage/sql/retention.sql:dead_tuples)
/// once its dead tuples pass both bounds: a count, and a share of its live
/// rows. Autovacuum's own trigger (20% of the table, checked at most once
/// a minute) lets such tables pile up dead tuples for minutes. The ring's
/// slots need none: they are emptied whole.
constexpr int64_t vacuum_min_dead = 5000;
constexpr double vacuum_dead_share = 0.05;

/// The ring (docs/storage.md): jobs are stored in 8 slots that take turns,
/// each current for the ring's period, and a slot is emptied whole (by
/// TRUNCATE) once it stopped being current longer ago than
/// completed_retention. The leader sets the period to this share of its
/// completed_retention, within these bounds: a quarter keeps completed
/// jobs at most about a quarter past their retention, and a slot is
/// emptied when it is three to four periods old, long before it is
/// current again.
constexpr int ring_periods_per_retention = 4;
constexpr std::chrono::milliseconds ring_period_min = 1min;
constexpr std::chrono::milliseconds ring_period_max = 6h;

/// How long a claim waits for a claim lock of its queue (a lane's, see
/// docs/storage.md) held by another session before it goes on without the
/// jobs behind it, and says who holds it. Claims hold it for milliseconds;
/// a wait without bound behind a stuck holder would stall the claiming
/// connection, and the heartbeat that shares it.
constexpr std::chrono::milliseconds claim_lock_wait = 2s;
/// While claims find a claim lock stuck, how often the poller says so again.
constexpr std::chrono::milliseconds claim_lock_log_interval = 1min;

/// How long the ring's recycling waits for its locks on the slot it
/// empties before it gives up until the next round: every claim and
/// completion waits behind that lock request, so never long.
constexpr std::chrono::milliseconds ring_lock_timeout = 100ms;

/// The most jobs one round of the ring's retention carries from the slot
/// it empties into the current slot (the jobs that slot still needs).
/// The slot's lock stops every claim while it carries them, about a
/// second per 10,000; a slot with more (a backlog) is emptied over several
/// rounds, while the claims shrink what is left.
constexpr int ring_max_carried = 10000;

/// The ring's retention holds its slot's tables ACCESS EXCLUSIVE until it
/// commits, which stops every claim: should the leader vanish between the
/// statements of that transaction (a partition, a hung process), the
/// server ends the session after this long idle in it and frees them.
constexpr std::chrono::milliseconds ring_idle_timeout = 5s;

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

/// A command handler's child gets this long between SIGTERM (cancelled,
/// deadline, timeout, shutdown) and SIGKILL: long enough for a script to
/// finish a write and exit cleanly, short enough that a stuck child frees
/// its slot well before the executor gives the run up (one
/// heartbeat_interval, 30 s, after a deadline).
constexpr std::chrono::milliseconds kill_grace = 10s;

/// The longest line of a command's stdout that is read as an outcome
/// object; longer lines are skipped (and never held in memory).
constexpr size_t command_outcome_line_max = 64 * 1024;

/// The end of a failed command's stderr that becomes its error message:
/// what a traceback's last frames and the exception need, and within the
/// 4 KiB a job's last_error_message keeps.
constexpr size_t command_stderr_tail = 4000;

/// An HTTP kind's request is given up (and retried) after this long when
/// its kind sets no timeout: longer than a healthy endpoint takes, shorter
/// than a lease.
constexpr std::chrono::milliseconds http_timeout = 30s;

/// The longest an endpoint's Retry-After moves a job when its kind sets no
/// max_retry_after: a day outlasts any real back-pressure, while a header
/// of "3153600000" (or a date in 2126) would park the job for a century.
constexpr std::chrono::milliseconds http_max_retry_after = 24h;

/// The most of an HTTP response body read for an outcome object (the rest
/// is read and dropped, so the connection stays usable).
constexpr size_t http_max_response = 1024 * 1024;

/// The start of an error response's body that goes into the job's error
/// message.
constexpr size_t http_error_excerpt = 512;

/// Jobs of one queue running at once on one node.
constexpr int concurrency = 10;

/// Claimed jobs a queue's poller may hold before their handlers start (its
/// local queue). Claims fill it whatever the concurrency, so a node at the
/// default concurrency of 10 still claims hundreds of jobs per statement
/// (at 10, claims limited to the free slots made it 25x slower than
/// graphile-worker's batched mode). It is refilled a third at a time with
/// up to two claims in flight, so claims take up to max_claim jobs: each
/// claim costs two round trips, a commit and a few thread wake-ups whatever
/// its size, and on the 2-core project machines these dominated until
/// claims reached about 2,000 jobs (bench/results: 60k jobs/s with a
/// target of 1,500, 100-114k with 6,000, same run). It only fills for jobs
/// that finish fast: it starts at one round of the concurrency, doubles
/// while handlers outrun the claims, and halves when buffered jobs wait
/// longer than prefetch_horizon; local_queue_bytes bounds its memory.
constexpr int local_queue_size = 6000;

/// Bytes of args and metadata a queue's claimed and running jobs may hold
/// at once (a single bigger job is still claimed, alone): 50 jobs of 10 MB
/// args must not take gigabytes.
constexpr int64_t local_queue_bytes = int64_t{64} << 20;

/// A buffered job that waited longer than this before its handler started
/// halves the buffer's target: the node holds more than it runs soon, and
/// other nodes could run those jobs.
constexpr std::chrono::milliseconds prefetch_horizon = 1s;

/// How soon after its handler starts a job's start is recorded
/// (job_starts): a worker that dies has the jobs recorded as started
/// charged and the others, buffered but never started, given back
/// uncharged. Recording a moment later rather than before each start
/// costs a few statements a second instead of one per start round (which
/// would halve the throughput of fast jobs at the default concurrency);
/// a job started within this moment before its worker died goes back
/// uncharged once, and its next claim records its start before it runs,
/// so a job that kills its worker is charged a crash later.
constexpr std::chrono::milliseconds start_record_delay = 200ms;

/// Most jobs one claim statement takes (see local_queue_size).
constexpr int max_claim = 2000;

/// After the drain, runtime::stop() waits this long for handlers that
/// ignored their cancellation before it reports them abandoned (they can
/// no longer reach the actor system either way).
constexpr std::chrono::milliseconds stop_handler_wait = 5s;

/// A blocking-pool thread idle this long exits: an idle node holds no
/// handler threads.
constexpr std::chrono::milliseconds blocking_idle_timeout = 10s;

/// CAF scheduler threads; 0 = one per core. Handlers that block run on the
/// blocking pool, so the actors need no more threads than cores.
constexpr int scheduler_threads = 0;

/// CAF scheduling policy: "sharing" (one shared queue; idle threads sleep
/// on a condition variable) or "stealing" (per-thread queues; idle threads
/// poll). See bench/results for the measurements behind the default.
constexpr const char* scheduler_policy = "sharing";

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

/// How often the queues' depth is sampled for /metrics ([metrics]
/// queue_stats_interval).
constexpr std::chrono::milliseconds queue_stats_interval = 15s;

/// Queues not in the node's configuration that get their own `queue` label
/// in /metrics ([metrics] max_metric_queues); the rest are summed into
/// queue="other". The sampled gauges name every queue with jobs in the
/// database, and any SQL client can insert a queue name: one INSERT of
/// 100,000 names would otherwise make 100,000 series per gauge, enough to
/// slow the scrape and the Prometheus behind it. 100 leaves room for the
/// queues of the cluster's other nodes (the leader samples them all) while
/// each sampled gauge stays within 100 + the node's own queues + 1 series;
/// the node's own queues never count against it.
constexpr int max_metric_queues = 100;

/// The dashboard is served with the endpoint ([http] dashboard): a node
/// with [http] listen shows its queues at / unless told not to.
constexpr bool http_dashboard = true;

/// The shortest dashboard token accepted ([http] token, token_env): a
/// guessable secret protects nothing.
constexpr size_t http_min_token_length = 16;

/// Log line format ([log] format): "text" or "json".
constexpr const char* log_format = "text";

/// [periodic.NAME] timezone: cron fields are read in UTC unless a
/// schedule names its zone. UTC has no daylight saving time, so no tick is
/// moved or merged (see config/cron.hpp).
constexpr const char* periodic_timezone = "UTC";

/// [periodic.NAME] catch_up: "latest" (after downtime, enqueue the one most
/// recent missed tick) or "none". A job that runs once after an outage is
/// what most periodic work (reports, syncs, cleanups) wants; it never
/// floods the queue with every tick of the outage.
constexpr const char* periodic_catch_up = "latest";

/// The queue and priority of a periodic job whose schedule names none:
/// those of any enqueue.
constexpr const char* periodic_queue = queue;
constexpr int periodic_priority = 0;

/// A tick handled this long after its time is still on time (a timer that
/// fired late on a busy machine, a slow commit, a database blip); older,
/// it counts as missed, and catch_up decides. Long enough that a loaded
/// node never drops a tick, short enough that "none" means none after a
/// real outage.
constexpr std::chrono::milliseconds periodic_misfire_grace = 10s;

/// The periodic scheduler sleeps until the next tick, but at most this
/// long: then it looks at the clock again, so a wall clock that was set
/// back or forward (NTP) delays no tick by more than this.
constexpr std::chrono::milliseconds periodic_max_sleep = 60s;

/// How far the cron search looks for a tick, in years: past this, a
/// schedule has no next tick. A Feb 29 comes within 8 years (2096, then
/// 2104); every satisfiable expression matches well within this.
constexpr int cron_search_years = 30;

/// The channel the NOTIFY trigger and the listener share.
constexpr const char* notify_channel = "actor_worker_jobs";

/// The NOTIFY channel of `actor-worker jobs cancel`: the payload is the id
/// of a running job to cancel (its row in job_cancel_requests makes the
/// request durable).
constexpr const char* cancel_channel = "actor_worker_cancel";

/// The NOTIFY channel of leadership: a leader that stops gracefully
/// resigns and notifies it (the payload is its worker id), and every
/// listening candidate tries to take the lease at once.
constexpr const char* leader_channel = "actor_worker_leader";

/// The largest N of a queue's rate_limit ("N/s", "N/m") and of its
/// global_concurrency: far above what a cluster of this runtime reaches
/// (about 10^5 jobs/s per node), so a larger value would limit nothing,
/// and a typo of extra digits is caught.
constexpr int max_rate_limit = 1'000'000;
constexpr int max_global_concurrency = 1'000'000;

/// The NOTIFY channel of a queue's pause (named in migrations/016 too): its
/// trigger sends "pause:QUEUE" or "resume:QUEUE" when a commit changes the
/// pause, from the CLI, the dashboard or plain SQL (durable in the row).
constexpr const char* queue_controls_channel = "actor_worker_queue_controls";

/// How long the listener blocks waiting for a NOTIFY before it checks its
/// mailbox again; bounds how late it notices a shutdown.
constexpr std::chrono::milliseconds listen_wait = 200ms;

} // namespace aw::defaults
