#pragma once
// The validated configuration of a worker node. Loaded from TOML by
// load_config(); every field has its default in config/defaults.hpp.

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "actor_worker/config/cron.hpp"
#include "actor_worker/config/defaults.hpp"

namespace aw {

/// [database]
struct database_config {
  /// libpq connection URL or key=value string. Overridden by --database-url
  /// and DATABASE_URL. Never logged (it may carry a password).
  std::string url;
  /// Connections for claims and outcomes (>= 1); LISTEN uses one more.
  int pool_size = defaults::pool_size;
  /// "none" or "transaction": a pooler in transaction mode (PgBouncer
  /// pool_mode = transaction) hands each transaction any server session,
  /// so the worker keeps nothing in a session past a transaction: no named
  /// prepared statements (each statement is sent with its text), no
  /// session settings or session advisory locks, and LISTEN only on
  /// listen_url.
  std::string pooler = defaults::pooler;
  /// Connections for the transactions of transactional handlers (>= 1),
  /// opened when first needed (defaults::transactional_pool_size).
  int transactional_pool_size = defaults::transactional_pool_size;
  /// The longest a transactional handler's transaction may stay open
  /// (> 0; defaults::transaction_timeout).
  std::chrono::milliseconds transaction_timeout = defaults::transaction_timeout;
  /// Where the LISTEN connection goes (a URL straight to PostgreSQL, past
  /// the pooler). Empty: `url` when pooler = "none"; with pooler =
  /// "transaction", no LISTEN at all (idle pollers find new jobs every
  /// poll_interval instead). Never logged.
  std::string listen_url;

  /// The URL for LISTEN, or "" for none.
  std::string notification_url() const {
    if (!listen_url.empty())
      return listen_url;
    return pooler == "transaction" ? std::string{} : url;
  }
};

/// [databases.NAME]: a further database with queues of its own (queues
/// sharded across databases). Its queues are mapped to it by
/// [queues.Q] database = "NAME" (runtime_config::queue_databases); each
/// database has its own schema (`migrate` migrates every one), its own
/// leader, and its own connections, so an outage stops only its queues.
struct named_database {
  /// The section's name (not "default": that is the [database] section).
  std::string name;
  /// url, pool_size, pooler, listen_url, transactional_pool_size,
  /// transaction_timeout, as in [database]. The url is
  /// required (no DATABASE_URL fallback) and never logged.
  database_config settings;
};

/// [queues.NAME]
struct queue_config {
  /// The queue's name, as in the jobs.queue column.
  std::string name = defaults::queue;
  /// Jobs of this queue running at once on this node (>= 1).
  int concurrency = defaults::concurrency;
  /// Deadline of a run of a job that has none of its own, counted from the
  /// start of its handler; 0 = none.
  std::chrono::milliseconds deadline{0};
  /// Claimed jobs held locally before their handlers start; 0 = the
  /// worker's local_queue_size.
  int local_queue_size = 0;
  /// Bytes the queue's claimed and running jobs may hold; 0 = the worker's
  /// local_queue_bytes.
  int64_t local_queue_bytes = 0;
  /// Transactional runs of the queue that share one transaction and one
  /// commit, each handler in a savepoint of its own (docs/transactional.md);
  /// 1 = a transaction per run. 1 to defaults::max_transactional_group.
  int transactional_group = defaults::transactional_group;
  /// Cluster-wide ([queues.Q] only): at most this many jobs of the queue
  /// held at once across all nodes (claimed into a node's buffer, running,
  /// or with the outcome not committed yet), enforced by the claim; 0 = no
  /// limit. Written into queue_controls when a node starts.
  int global_concurrency = 0;
  /// Cluster-wide ([queues.Q] only): at most rate_limit jobs of the queue
  /// claimed per rate_period across all nodes, over a sliding window;
  /// 0 = no limit. Written in the file as "N/s" or "N/m".
  int rate_limit = 0;
  /// 1 s ("N/s") or 1 min ("N/m"); 0 without a rate limit.
  std::chrono::milliseconds rate_period{0};
};

/// Parses a rate_limit value: "N/s" or "N/m", N from 1 to
/// defaults::max_rate_limit. Returns {N, period}; throws
/// std::invalid_argument saying what is wrong.
std::pair<int, std::chrono::milliseconds> parse_rate_limit(const std::string& text);

/// [scheduler]: CAF's scheduler, for the actors (not the handlers that
/// block: those run on the blocking pool).
struct scheduler_config {
  /// Threads; 0 = one per core.
  int threads = defaults::scheduler_threads;
  /// "sharing" or "stealing".
  std::string policy = defaults::scheduler_policy;
};

/// [worker]
struct worker_config {
  /// This node's name; the first part of `locked_by`.
  std::string node = defaults::node;
  /// Idle poll interval.
  std::chrono::milliseconds poll_interval = defaults::poll_interval;
  /// Failed attempts before dead-lettering (a job's own max_attempts wins).
  int max_retries = defaults::max_retries;
  /// Drain budget at shutdown.
  std::chrono::milliseconds shutdown_drain = defaults::shutdown_drain;
  /// How long completed rows are kept; 0 deletes them at completion.
  std::chrono::milliseconds completed_retention = defaults::completed_retention;
  /// How long dead letters are kept; 0 keeps them until retried or purged.
  std::chrono::milliseconds dead_letter_retention
    = defaults::dead_letter_retention;
  /// How often expired completed rows are deleted.
  std::chrono::milliseconds maintenance_interval = defaults::maintenance_interval;
  /// How often the leases of running jobs are refreshed (and expired ones
  /// rescued).
  std::chrono::milliseconds heartbeat_interval = defaults::heartbeat_interval;
  /// A lease older than this is rescued; at least 3 x heartbeat_interval.
  std::chrono::milliseconds reclaim_window = defaults::reclaim_window;
  /// How many of this process's pollers poll on each idle interval; the
  /// others wait for a wake-up or their turn (the permits rotate, so each
  /// polls at least every poll_interval x ceil(pollers / permits)).
  /// 0 = no gate.
  int idle_poll_permits = defaults::idle_poll_permits;
  /// Claimed jobs each queue holds locally before their handlers start
  /// (the claim size does not depend on the concurrency).
  int local_queue_size = defaults::local_queue_size;
  /// Bytes of args and metadata each queue's claimed and running jobs may
  /// hold at once.
  int64_t local_queue_bytes = defaults::local_queue_bytes;
};

/// [kinds.NAME] command = [...]: a job kind run as a child process (see
/// app/command_handler.hpp and docs/kinds.md).
struct command_kind_config {
  /// The program and its arguments, run without a shell; argv[0] without a
  /// '/' is looked up in the worker's PATH. Not empty.
  std::vector<std::string> argv;
  /// Variables added to (or replacing) the worker's environment.
  std::vector<std::pair<std::string, std::string>> env;
  /// The child's working directory; empty: the worker's.
  std::string cwd;
  /// A run taking longer is stopped (SIGTERM, then SIGKILL after
  /// kill_grace) and retried; 0 = none (the job's deadline still applies).
  std::chrono::milliseconds timeout{0};
  /// Between SIGTERM and SIGKILL to the child's process group.
  std::chrono::milliseconds kill_grace = defaults::kill_grace;
};

/// A request header of an HTTP kind. Its value is a secret: never logged,
/// never in an error message.
struct http_header {
  /// The header's name (`Authorization`).
  std::string name;
  /// As configured, `${NAME}` references included until
  /// resolve_header_variables() replaces them.
  std::string value;
  /// Where it is configured ("worker.toml:7: key
  /// 'kinds.notify.http.headers.Authorization'"), for errors found later.
  std::string where;
};

/// [kinds.NAME] http = {...}: a job kind POSTed to a URL (see
/// app/http_handler.hpp and docs/kinds.md).
struct http_kind_config {
  /// http:// or https:// URL the job document is POSTed to.
  std::string url;
  /// Request headers, sorted by name.
  std::vector<http_header> headers;
  /// The whole request (connect, send, response) may take this long; then
  /// it is aborted and retried. Greater than 0.
  std::chrono::milliseconds timeout = defaults::http_timeout;
  /// A 429/503's Retry-After moves the job at most this far. Greater
  /// than 0.
  std::chrono::milliseconds max_retry_after = defaults::http_max_retry_after;
};

/// [kinds.NAME]: a job kind the binary runs without C++, exactly one of
/// `command` and `http`.
struct kind_config {
  /// The job kind, as in the jobs.kind column.
  std::string name;
  /// Where it is configured ("worker.toml:12"), for errors found when it
  /// is registered (a clash with a built-in kind).
  std::string where;
  /// Set for a kind that runs a program per job (`command`).
  std::optional<command_kind_config> command;
  /// Set for a kind that POSTs each job to a URL (`http`).
  std::optional<http_kind_config> http;
  /// `callback_timeout`: each run registers its callback id before it
  /// starts, timing out this long after, and hands it to the program
  /// (AW_CALLBACK_ID for a command, the X-AW-Callback-Id header for HTTP,
  /// "callback_id" in the job document for both), which can pass it on
  /// before it answers wait_for_callback (docs/callbacks.md). Unset: no id
  /// until the job parks. Greater than 0.
  std::optional<std::chrono::milliseconds> callback_timeout;
};

/// [http]: the node's HTTP endpoint: /healthz, /readyz and /metrics
/// (app/http_endpoint.hpp), and the dashboard at / with its API under
/// /api/ (app/dashboard.hpp). Off unless `listen` is set.
struct http_config {
  /// "HOST:PORT" to listen on ("127.0.0.1:9464", "[::1]:9464"); empty: no
  /// endpoint. Every example binds to loopback: the metrics name queues
  /// and kinds, so expose it only to a scraper you trust.
  std::string listen;
  /// Serve the dashboard (/ and /api/...). Off: the endpoint serves the
  /// probes and /metrics only, and opens no database connection.
  bool dashboard = defaults::http_dashboard;
  /// The secret the dashboard's actions require, sent as `Authorization:
  /// Bearer TOKEN` (never a cookie or a URL); at least
  /// defaults::http_min_token_length characters. Excludes token_env. With
  /// neither, every action is refused (403). Never logged.
  std::string token;
  /// The name of an environment variable holding the token (resolved when
  /// the endpoint starts: commands other than `run` need none of the
  /// worker's secrets). Excludes token.
  std::string token_env;
  /// Host header values the dashboard answers ("localhost:9464",
  /// "dash.example.com"; an entry without a port matches its name on any
  /// port), so a DNS-rebinding page cannot reach a loopback dashboard.
  /// Empty: the listen address and localhost, 127.0.0.1 and [::1], with
  /// the listen port (effective_allowed_hosts()).
  std::vector<std::string> allowed_hosts;
  /// Every dashboard action is refused (403), token or not.
  bool read_only = false;
  /// The dashboard's data (/api/...) requires the token too; the page asks
  /// for it. Needs token or token_env.
  bool protect_reads = false;

  /// The host part of `listen` ("127.0.0.1", "::1").
  std::string host() const;
  /// The port part of `listen`.
  int port() const;
  /// `allowed_hosts`, or the default list when it is empty, each as
  /// normalize_host_port() writes it.
  std::vector<std::string> effective_allowed_hosts() const;
  /// The token: `token`, or the value of the variable `token_env` names;
  /// "" when neither is set. Throws config_error when token_env names a
  /// variable that is unset, empty or shorter than the minimum.
  std::string resolve_token() const;
};

/// [metrics]
struct metrics_config {
  /// How often the queues' depth by state and their oldest job's age are
  /// sampled from the database for /metrics (one statement that reads only
  /// the live jobs' indexes); 0 = never.
  std::chrono::milliseconds queue_stats_interval
    = defaults::queue_stats_interval;
  /// Queues outside this node's configuration that get their own `queue`
  /// label in /metrics (the first met, kept for the process's life); the
  /// others are summed into queue="other", so SQL inserting many queue
  /// names cannot make as many series.
  int max_metric_queues = defaults::max_metric_queues;
};

/// [log]
struct log_config {
  /// "text" (one human-readable line per event) or "json" (one object per
  /// line: time, level, message, and the job's id, kind, queue and attempt
  /// where there is one).
  std::string format = defaults::log_format;
};

/// [periodic.NAME] catch_up: what a scheduler does with ticks that passed
/// while no scheduler ran (every node down, a database outage, a leader
/// hand-over), or that it handled later than
/// defaults::periodic_misfire_grace.
enum class catch_up_policy {
  /// Enqueue the one most recent missed tick (however many were missed),
  /// then go on with the schedule.
  latest,
  /// Enqueue none of them; the next tick is the first after now.
  none,
};

/// "latest" or "none".
const char* to_string(catch_up_policy p);

/// [periodic.NAME]: a job enqueued on a cron schedule, once per tick across
/// the whole cluster (see docs/periodic.md and
/// actors/periodic_scheduler.hpp).
/// A cluster's schedules are the top level's: every node has the same.
struct periodic_config {
  /// The section's name: the schedule's identity (periodic_schedules.name).
  std::string name;
  /// Where the section starts ("cluster.toml:40"), for messages.
  std::string where;
  /// `cron`: the expression as written (config/cron.hpp); required.
  std::string cron;
  /// `timezone`: the IANA zone the fields are read in.
  std::string timezone = defaults::periodic_timezone;
  /// `kind`: the job kind enqueued; required.
  std::string kind;
  /// `args`: the job's args, an inline table, as JSON text ("{}" when the
  /// section has none).
  std::string args_json = "{}";
  /// `queue`: the queue the job goes to.
  std::string queue = defaults::periodic_queue;
  /// `priority`: the job's priority (lower runs first).
  int priority = defaults::periodic_priority;
  /// `catch_up`: "latest" (default) or "none".
  catch_up_policy catch_up = catch_up_policy::latest;

  /// `cron` in `timezone`, parsed (the loader checked both; throws
  /// std::invalid_argument if they were changed since).
  cron_schedule schedule() const;
  /// What identifies the ticks: the expression and the zone. A schedule
  /// whose spec changed starts afresh (no catch-up of the old one's ticks).
  std::string spec() const {
    return cron + " @ " + timezone;
  }
};

/// A whole node's configuration.
struct runtime_config {
  /// [database]: the default database, where every queue not mapped elsewhere lives.
  database_config database;
  /// [worker]: the node's name, intervals, retention and buffers.
  worker_config worker;
  /// [scheduler]: CAF's scheduler for the actors.
  scheduler_config scheduler;
  /// At least one queue; `default` with default concurrency when none is
  /// configured.
  std::vector<queue_config> queues;
  /// [kinds.NAME]: job kinds run as commands or over HTTP, sorted by name.
  std::vector<kind_config> kinds;
  /// [periodic.NAME]: jobs enqueued on cron schedules, sorted by name.
  std::vector<periodic_config> periodic;
  /// [http]: the probes, /metrics and the dashboard (off unless listen is set).
  http_config http;
  /// [metrics]: how often queue depth is sampled.
  metrics_config metrics;
  /// [log]: the log line format.
  log_config log;
  /// [databases.NAME]: databases besides [database], sorted by name.
  std::vector<named_database> databases;
  /// [queues.Q] database = "NAME": the queues that live in a database of
  /// `databases`. A queue not listed lives in [database] ("default").
  /// Cluster-wide: every node of a cluster file has the top level's map,
  /// whichever queues it serves, so its CLI, its follow-ups and its
  /// embedding API route every queue alike.
  std::map<std::string, std::string> queue_databases;

  /// Checks ranges and fills in the default queue. Throws config_error
  /// naming the offending key.
  void validate();

  /// The name of the database `queue` lives in ("default" for [database]).
  const std::string& database_of(const std::string& queue) const;
  /// The settings of database `name` ("default" or "" is [database]).
  /// Throws config_error listing the names when there is none.
  const database_config& database_named(const std::string& name) const;
  /// "default", then the [databases.NAME] names in order.
  std::vector<std::string> database_names() const;
  /// True when the file names more than one database.
  bool sharded() const {
    return !databases.empty();
  }
  /// What this node runs against database `name`: its settings as
  /// [database], no further databases, and only the queues and periodic
  /// schedules whose queue lives there (queue_databases is kept, for
  /// routing). Throws config_error for an unknown name.
  runtime_config for_database(const std::string& name) const;
  /// Throws std::invalid_argument when `queue` does not live in database
  /// `database`, saying that `what` (a follow-up, enqueued in the
  /// transaction of the outcome that triggers it) cannot reach it.
  void require_database(const std::string& queue, const std::string& database,
                        const std::string& what) const;
  /// The database a one-shot command works on: `database` when given
  /// (throws config_error for an unknown name, or when `queue` is given
  /// and lives elsewhere), else `queue`'s database, else the default.
  /// The result's [database] is that database's settings.
  runtime_config routed(const std::string& database,
                        const std::string& queue) const;
};

/// An invalid configuration: the message names the file, line and key.
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Why `name` cannot be a kind or queue name, or empty when it can: the
/// one rule for both, in a configuration and at enqueue. Not empty, at
/// most defaults::max_name_length bytes, no control characters (a name
/// ends up in log lines, CLI tables and metrics, where those would forge
/// output).
std::string name_problem(const std::string& name);

/// Parses "250ms", "2s", "5m", "24h", "7d" (also "1.5s", "0"), up to
/// defaults::max_duration. Throws std::invalid_argument with a message
/// quoting the bad text.
std::chrono::milliseconds parse_duration(const std::string& text);

/// Renders a duration the way parse_duration reads it ("1500ms", "2s").
std::string format_duration(std::chrono::milliseconds d);

/// Parses a size: "65536", "512KiB", "64MiB", "1GiB" (also kB, MB, GB as
/// powers of 1000). Throws std::invalid_argument quoting the bad text.
int64_t parse_size(const std::string& text);

/// Replaces every `${NAME}` in `kind`'s header values by the environment
/// variable NAME. The loader only checks the references' syntax, so that
/// commands other than `run` need none of the worker's secrets; the kinds'
/// registration calls this. Throws config_error naming the file, line and
/// key for an unset variable or a value that then holds a line break
/// (never quoting the value).
void resolve_header_variables(http_kind_config& kind);

/// "host", "host:port", "[v6]" or "[v6]:port" (a Host header, an
/// allowed_hosts entry) in lower case, IPv6 in brackets, the port without
/// leading zeros (none when it has none). Nothing when it is not of that
/// form (a path, spaces, user info, a bad port, an empty host).
std::optional<std::string> normalize_host_port(const std::string& text);

/// Loads and validates a TOML file. Unknown keys, wrong types and bad
/// durations are rejected with the file, line and key in the message.
runtime_config load_config(const std::string& path);

/// [nodes.NAME]: one node of a cluster file, resolved: the top level's
/// [database], [worker], [queues.*] (and every other section) with the
/// node's own worker keys, the queues it serves and their per-node
/// settings over them.
struct node_config {
  /// The section's name: the node's name (its worker.node).
  std::string name;
  /// Where the section starts ("cluster.toml:40").
  std::string where;
  /// What `run --node NAME` runs.
  runtime_config config;
};

/// A configuration file read whole: the top level, and the nodes when it
/// describes a cluster. A file without [nodes] is a single node's file, as
/// always.
struct cluster_config {
  /// The file (for messages).
  std::string source;
  /// [cluster] name; empty when the file has no [cluster].
  std::string name;
  /// The top level: every node's defaults, and the whole configuration of
  /// a file without [nodes].
  runtime_config defaults;
  /// The top level's [worker] node when the file sets it (it picks the
  /// node when `--node` is not given).
  std::string named_node;
  /// [nodes.NAME], sorted by name; empty for a single node's file.
  std::vector<node_config> nodes;
};

/// Reads a whole configuration, every node included. Throws config_error
/// with file:line:key for the first problem of any node.
cluster_config parse_cluster(const std::string& toml_text,
                             const std::string& source_name);
cluster_config load_cluster(const std::string& path);

/// The configuration to run: for a file with [nodes], the node named
/// `requested` (`--node`), else [worker] node, else this host's name;
/// a name the file does not define throws config_error listing the names
/// it does. For a file without [nodes], the top level (`requested`, when
/// given, names the node).
runtime_config select_node(const cluster_config& cluster,
                           const std::string& requested);

/// This host's name (gethostname), or the default node name.
std::string local_host_name();

/// Where a node's configuration comes from, lowest precedence first.
struct config_sources {
  /// A TOML file; empty: the defaults.
  std::string file;
  /// Wins over DATABASE_URL and the file's [database] url (the CLI's
  /// --database-url); empty: not given.
  std::string database_url;
  /// The node to run (`--node`); empty: [worker] node, then the host name.
  std::string node;
  /// Pick a node of a cluster file even without `node` (`run` does; the
  /// admin commands use the top level, which every node shares).
  bool select_node = false;
};

/// Resolves a configuration the way `actor-worker` does: the file (or the
/// defaults), then the DATABASE_URL environment variable, then
/// `sources.database_url`, each winning over the one before. Throws
/// config_error for an invalid file, and when no database URL results.
runtime_config resolve_config(const config_sources& sources);

/// The same from TOML text; `source_name` stands for the file in messages.
runtime_config parse_config(const std::string& toml_text,
                            const std::string& source_name);

} // namespace aw
