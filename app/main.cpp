// The actor-worker binary: the command line (CLI11) built from the table of
// commands (app/cli/command_table.hpp) and the mapping of errors to exit
// codes; each command lives in app/cli/.

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/app/cli/cli.hpp"
#include "actor_worker/app/cli/command_table.hpp"
#include "actor_worker/app/cli/log_sink.hpp"
#include "actor_worker/app/utf8.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/db_error.hpp"
#include "actor_worker/storage/migrations.hpp"

using namespace aw::cli;

namespace {

/// `text` with every byte outside printable ASCII as \xNN.
std::string hex_escaped(const std::string& text) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 0xF];
    }
  }
  return out;
}

/// The names of `group`'s commands, comma-separated.
std::string commands_of(const CLI::App& group) {
  std::string names;
  for (auto* sub : group.get_subcommands({}))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

/// The innermost command given (the app itself when none).
CLI::App* innermost(CLI::App& app) {
  CLI::App* at = &app;
  while (!at->get_subcommands().empty())
    at = at->get_subcommands().front();
  return at;
}

/// Every argument must be UTF-8 (the database stores text as UTF-8, and a
/// message must be able to show it): names the first one that is not.
void require_utf8(CLI::App& app) {
  for (CLI::App* at = &app;;) {
    for (auto* opt : at->get_options())
      for (auto& value : opt->results())
        if (!aw::valid_utf8(value))
          throw usage_error(
            opt->get_name()
            + (at == &app ? std::string{} : " (of '" + at->get_name() + "')")
            + " is not valid UTF-8: " + hex_escaped(value));
    if (at->get_subcommands().empty())
      return;
    at = at->get_subcommands().front();
  }
}

/// Adds the global options to `cmd` (the app and every command, so each
/// command's --help lists them).
void add_globals(CLI::App& cmd, parsed_options& o) {
  const char* group = "Global options";
  cmd.add_option("--config", o.config_file, "TOML configuration file")
    ->check(CLI::ExistingFile)
    ->group(group);
  cmd.add_option("--database-url", o.database_url,
                 "PostgreSQL URL (wins over DATABASE_URL and the config)")
    ->group(group);
  cmd.add_option("--database", o.database,
                 "with queues sharded across databases: the database a "
                 "command works on (\"default\" is [database]; default: "
                 "the queue's database, or [database])")
    ->group(group);
  cmd.add_option("--log-level", o.log_level,
                 "trace, debug, info, warn, error or critical")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error",
                           "critical"}))
    ->group(group);
}

/// The command line's commands and the table entry of each.
using entries = std::map<const CLI::App*, const command*>;

/// Adds `table`'s commands to `parent`, binding their options to `o`.
void add_commands(CLI::App& parent, const std::vector<command>& table,
                  parsed_options& o, entries& out) {
  for (auto& entry : table) {
    auto* cmd = parent.add_subcommand(entry.name, entry.help);
    // A group: one of its commands, named by report_missing when missing
    // or unknown.
    if (!entry.commands.empty())
      cmd->require_subcommand(0, 1);
    add_globals(*cmd, o);
    if (entry.options != nullptr)
      entry.options(*cmd, o);
    if (entry.json_help != nullptr)
      cmd->add_flag("--json", o.json, entry.json_help);
    out.emplace(cmd, &entry);
    add_commands(*cmd, entry.commands, o, out);
  }
}

/// A command group given without one of its commands, or with one it does
/// not have: says which, and what would do. False when the command given
/// can run (a group that runs alone, as `queues`, given with no extras).
bool report_missing(CLI::App& app, const entries& table,
                    const std::vector<std::string>& extras) {
  auto* at = innermost(app);
  if (at == &app || at->get_subcommands({}).empty())
    return false;
  if (table.at(at)->run != nullptr && extras.empty())
    return false;
  if (!extras.empty() && extras.front().rfind("-", 0) != 0)
    std::cerr << "unknown command '" << aw::printable(extras.front())
              << "' for '" << at->get_name()
              << "' (commands: " << commands_of(*at)
              << "); run with --help for more information" << std::endl;
  else
    std::cerr << "'" << at->get_name() << "' needs a command (commands: "
              << commands_of(*at)
              << "); run with --help for more information" << std::endl;
  return true;
}

/// Parses the command line; an exit code when it does not name a command
/// to run (--help, --version, bad usage), else nothing.
std::optional<int> parse(CLI::App& app, const entries& table, int argc,
                         char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError&) {
    // A word where a command belongs: say which, and what would do.
    auto extras = app.remaining();
    if (app.get_subcommands().empty() && !extras.empty()
        && extras.front().rfind("-", 0) != 0) {
      std::cerr << "unknown command '" << aw::printable(extras.front())
                << "' (commands: " << commands_of(app)
                << "); run with --help for more information" << std::endl;
      return exit_usage;
    }
    if (report_missing(app, table, extras))
      return exit_usage;
    return app.exit(CLI::ExtrasError(extras)) == 0 ? exit_ok : exit_usage;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << "no command given (commands: " << commands_of(app)
              << "); run with --help for more information" << std::endl;
    return exit_usage;
  }
  if (report_missing(app, table, {}))
    return exit_usage;
  try {
    require_utf8(app);
  } catch (const usage_error& e) {
    std::cerr << e.what() << std::endl;
    return exit_usage;
  }
  return std::nullopt;
}

/// Runs `cmd` with the errors mapped to exit codes (app/cli/cli.hpp).
int run_command(const command& cmd, invocation& at) {
  try {
    if (cmd.run != nullptr)
      return cmd.run(at);
  } catch (const aw::config_error& e) {
    spdlog::error("invalid configuration: {}", e.what());
    return exit_usage;
  } catch (const usage_error& e) {
    spdlog::error("{}", e.what());
    return exit_usage;
  } catch (const aw::storage::schema_error& e) {
    spdlog::error("{}", e.what());
    return exit_failure;
  } catch (const std::exception& e) {
    auto code = aw::storage::classify(e);
    if (code == aw::ec::database_misconfigured) {
      spdlog::error("invalid configuration: database.url: the server refused "
                    "the connection: {}",
                    aw::storage::one_line(e));
      return exit_usage;
    }
    if (code == aw::ec::database_unavailable) {
      spdlog::error("cannot reach the database: {}",
                    aw::storage::one_line(e));
      return exit_unreachable;
    }
    std::string hint;
    if (auto sql = dynamic_cast<const pqxx::sql_error*>(&e);
        sql && (sql->sqlstate() == "42P01" || sql->sqlstate() == "42703"))
      hint = " (the schema is missing or out of date: run `actor-worker "
             "migrate`)";
    spdlog::error("{}{}", aw::storage::one_line(e), hint);
    return exit_failure;
  }
  return exit_usage;
}

} // namespace

int main(int argc, char** argv) {
  // Logs go to stderr, so stdout carries only command results (`enqueue`
  // prints the new id alone).
  install_stderr_logger();

  CLI::App app{"actor-worker: durable background jobs on PostgreSQL"};
  // One command; none, or an unknown one, is reported by name.
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string{"actor-worker "} + AW_VERSION);
  // Global options may also follow the subcommand: `actor-worker run --config x`.
  app.fallthrough();
  parsed_options options;
  add_globals(app, options);
  entries table;
  add_commands(app, command_table(), options, table);
  if (auto refused = parse(app, table, argc, argv))
    return *refused;
  spdlog::set_level(spdlog::level::from_str(options.log_level));
  auto* given = innermost(app);
  invocation at{options, *given};
  return run_command(*table.at(given), at);
}
