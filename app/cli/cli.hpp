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

/// `run`: a worker node until SIGINT or SIGTERM (graceful).
int run_worker(const runtime_config& cfg);

/// `migrate`: applies missing migrations.
int migrate_schema(const runtime_config& cfg);

/// `enqueue KIND [ARGS_JSON]` and its flags.
struct enqueue_options {
  std::string kind;
  std::string args = "{}";
  std::string queue = defaults::queue;
  int priority = 0;
  int max_attempts = 0;
  std::string delay;
  std::string deadline;
  bool unique = false;
  std::string ordering_key;
};


/// `enqueue`: one job; prints its id alone on stdout.
int enqueue_job(const runtime_config& cfg, const enqueue_options& o);

/// `callback complete|fail|retry|resume CALLBACK_ID [PAYLOAD_JSON]`.
int resolve_callback(const runtime_config& cfg, const std::string& action,
                     const std::string& callback_id,
                     const std::string& payload_text);

/// `jobs show ID [--json]`.
int show_job(const runtime_config& cfg, int64_t id, bool json);

/// `dlq list [--json] [--limit N] [--queue Q]`.
int list_dead_letters(const runtime_config& cfg, int64_t limit,
                      const std::string& queue, bool json);

} // namespace aw::cli
