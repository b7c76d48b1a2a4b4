#pragma once
// The binary's commands as a table: each one's name, its one-line help, the
// options it adds and the function it runs (a group: its commands).
// app/main.cpp builds the command line from the table, parses it, and runs
// the command given with the errors mapped to exit codes.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actor_worker/app/cli/cli.hpp"

namespace CLI {
class App;
}

namespace aw::cli {

/// What the command line is parsed into: the global options (every
/// command takes them) and the options of every command. Only the command
/// given writes its own.
struct parsed_options {
  // -- global options ---------------------------------------------------------

  std::string config_file;
  std::string database_url;
  /// --database NAME: a database of the file ("default" is [database]).
  std::string database;
  std::string log_level = "info";

  // -- the commands' options --------------------------------------------------

  /// run --node.
  std::string node;
  /// --json of the commands that take a bare flag.
  bool json = false;
  /// queues pause|resume QUEUE.
  std::string control_queue;
  enqueue_options enqueue;
  jobs_list_options list;
  /// jobs show|cancel|retry ID.
  int64_t job_id = 0;
  /// jobs cancel --wait.
  std::string cancel_wait;
  /// dlq list --limit.
  int64_t limit = 100;
  /// dlq list|purge --queue.
  std::string dlq_queue;
  /// dlq show ID.
  int64_t dead_id = 0;
  dlq_retry_options dlq_retry;
  /// dlq purge --before.
  std::string purge_before;
  /// callback complete|fail|retry|resume CALLBACK_ID [PAYLOAD_JSON].
  std::string callback_id;
  std::string callback_payload;
};

/// What a command runs with: the options as parsed, the command given and
/// the configuration they name.
class invocation {
public:
  invocation(const parsed_options& options, const CLI::App& command)
    : options(options), command(command) {
    // nop
  }

  const parsed_options& options;

  /// The command given (the innermost one: `pause` of `queues pause`).
  const CLI::App& command;

  /// The configuration of --config, --database-url and DATABASE_URL, read
  /// on first use (`check` reads its file its own way and connects
  /// nowhere); `select_node`: pick the node (--node) as `run` does.
  const runtime_config& config(bool select_node = false);

  /// The configuration of the one database a one-shot command works on:
  /// --database, else the database of `queue`, else [database].
  runtime_config on(const std::string& queue);

private:
  std::optional<runtime_config> config_;
};

/// One command of the binary, or a group of commands.
struct command {
  const char* name;
  /// The one-line help of `--help`.
  const char* help;
  /// Adds the command's own options, bound to `o` (the global ones are
  /// added to every command by app/main.cpp).
  void (*options)(CLI::App& cmd, parsed_options& o);
  /// What its --json flag (bound to parsed_options::json, after the other
  /// options) prints; null: the command has none of that kind.
  const char* json_help;
  /// Runs it; null for a group given without one of its commands.
  int (*run)(invocation& at);
  /// A group's commands (it takes at most one); empty for a command.
  std::vector<command> commands;
};

/// The binary's commands, in the order `--help` lists them.
const std::vector<command>& command_table();

} // namespace aw::cli
