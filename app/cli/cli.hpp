#pragma once
// The commands of the actor-worker binary, one file each (app/cli/*.cpp);
// app/main.cpp parses the command line and maps errors to exit codes:
// 0 success; 1 a runtime failure (schema out of date, a failed statement,
// a job that does not exist); 2 bad usage or configuration; 3 the database
// is unreachable (one-shot commands only: `run` keeps trying instead).

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "actor_worker/config/config.hpp"
#include "actor_worker/config/defaults.hpp"

namespace aw::cli {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr int exit_unreachable = 3;

/// Bad usage: exit code 2 with the message.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A CLI duration: a bare number means seconds ("30"), else "500ms", "2m".
/// Throws usage_error naming `flag`.
std::chrono::milliseconds seconds_or_duration(const char* flag,
                                              const std::string& text);

/// `check`: validates `file` whole (every node of a cluster file) and
/// prints what each node would run; `json`: as a JSON document. Config
/// errors throw config_error (exit 2).
int check_config(const std::string& file, bool json);

/// The databases a listing (`queues`, `nodes`, `periodic`) covers: the
/// one `database` names, else every database of `cfg`. Throws config_error
/// for a name `cfg` does not define.
std::vector<std::string> listed_databases(const runtime_config& cfg,
                                          const std::string& database);

/// `nodes [--json]`: the worker processes of the cluster (worker_nodes) of
/// every database of `cfg` (rows then carry "database" when there are
/// several), or only of `database` when it is not empty.
int list_nodes(const runtime_config& cfg, const std::string& database,
               bool json);

/// `actor-worker queues [--json]`: every queue's jobs by state, the age of
/// its oldest available job, running jobs per node, pause and limits; of
/// every database of `cfg` (rows then carry "database" when there are
/// several), or only of `database` when it is not empty.
int list_queues(const runtime_config& cfg, const std::string& database,
                bool json);

/// `actor-worker queues pause|resume QUEUE` (`pause` true = pause). An
/// unknown queue (not in the configuration, no queue_controls row, no job
/// or dead letter) is refused with exit_failure and nothing changed.
int control_queue_cmd(const runtime_config& cfg, const std::string& queue,
                      bool pause);

/// `periodic [--json]`: the configured periodic schedules with their last
/// and next run (app/periodic_status.hpp has the JSON keys), each read in
/// the database of its queue ("database" in each row when there are
/// several), or only those of `database` when it is not empty.
int list_periodic(const runtime_config& cfg, const std::string& database,
                  bool json);

/// `run`: a worker node until SIGINT or SIGTERM (graceful).
int run_worker(const runtime_config& cfg);

/// `migrate`: applies missing migrations to every database of `cfg`
/// ([database], then each [databases.NAME]), or only to `database` when
/// it is not empty.
int migrate_schema(const runtime_config& cfg, const std::string& database);

/// `enqueue KIND [ARGS_JSON]` (or `enqueue --jsonl FILE`) and its flags.
struct enqueue_options {
  std::string kind;
  /// JSON text, `@FILE` (read from FILE) or `-` (read from stdin).
  std::string args = "{}";
  std::string queue = defaults::queue;
  int priority = 0;
  int max_attempts = 0;
  std::string delay;
  /// An RFC 3339 timestamp; exclusive with `delay`.
  std::string run_at;
  /// Comma-separated.
  std::string tags;
  /// A JSON object.
  std::string metadata;
  std::string deadline;
  bool unique = false;
  std::string ordering_key;
  /// --ordering-key was given (an empty one is refused, not taken as none).
  bool ordering_key_given = false;
  /// Bulk: a file (or `-` for stdin) of JSON lines, one job each.
  std::string jsonl;
};

/// `enqueue`: one job; prints its id alone on stdout. With --jsonl: every
/// job of the file, in batches, in one transaction; prints the count.
int enqueue_job(const runtime_config& cfg, const enqueue_options& o);

/// Parses an RFC 3339 timestamp ("2030-01-02T03:04:05Z",
/// "2030-01-02 03:04:05.250+02:00"), from 1677-09-21T00:12:45Z to
/// 2262-04-11T23:47:15Z (what a time_point holds). Throws usage_error
/// naming `what`.
std::chrono::system_clock::time_point parse_rfc3339(const std::string& what,
                                                   const std::string& text);

/// The whole of a file, or of stdin for "-". Throws usage_error naming
/// `what` when it cannot be read.
std::string read_source(const std::string& what, const std::string& path);

/// Refuses JSON `text` that nests arrays and objects deeper than
/// defaults::max_json_depth (before a parser recurses into it): throws
/// usage_error naming `what` and the byte where it goes too deep.
void check_json_depth(const std::string& what, const std::string& text);

/// `callback complete|fail|retry|resume CALLBACK_ID [PAYLOAD_JSON]` (the
/// payload as text, `@FILE` or `-` for stdin, as enqueue's args): in
/// `database` when given, else in each database of `cfg` in turn until one
/// knows the id (callback ids are unique across databases).
int resolve_callback(const runtime_config& cfg, const std::string& database,
                     const std::string& action,
                     const std::string& callback_id,
                     const std::string& payload_text);

/// `jobs show ID [--json]`.
int show_job(const runtime_config& cfg, int64_t id, bool json);

/// `jobs list` and its filters.
struct jobs_list_options {
  std::string state;
  std::string queue;
  std::string kind;
  int64_t limit = 100;
  int64_t after = 0;
  bool json = false;
};

/// `jobs list`: one page of jobs in id order (keyset pagination).
int list_jobs(const runtime_config& cfg, const jobs_list_options& o);

/// `jobs cancel ID [--wait DURATION] [--json]`.
int cancel_job(const runtime_config& cfg, int64_t id, const std::string& wait,
               bool json);

/// `jobs retry ID [--json]`.
int retry_job(const runtime_config& cfg, int64_t id, bool json);

/// `dlq list [--json] [--limit N] [--queue Q]`.
int list_dead_letters(const runtime_config& cfg, int64_t limit,
                      const std::string& queue, bool json);

/// `dlq show ID [--json]`.
int show_dead_letter(const runtime_config& cfg, int64_t id, bool json);

/// `dlq retry ID` or `dlq retry --all [--queue Q] [--kind K]`.
struct dlq_retry_options {
  int64_t id = 0;
  bool all = false;
  std::string queue;
  std::string kind;
  /// dead_letter_jobs.fingerprint (migrations/011_dashboard.sql).
  std::string fingerprint;
  bool json = false;
};

int retry_dead_letters(const runtime_config& cfg, const dlq_retry_options& o);

/// `dlq purge [--before DURATION] [--queue Q] [--json]`.
int purge_dead_letters(const runtime_config& cfg, const std::string& before,
                       const std::string& queue, bool json);

} // namespace aw::cli
