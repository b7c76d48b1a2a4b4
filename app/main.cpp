// The actor-worker binary: the command line (CLI11) and the mapping of
// errors to exit codes; each command lives in app/cli/.

#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actor_worker/app/cli/cli.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/storage/db_error.hpp"
#include "actor_worker/storage/migrations.hpp"

using namespace aw::cli;

namespace {

struct common_options {
  std::string config_file;
  std::string database_url;
  std::string log_level = "info";
};

} // namespace

int main(int argc, char** argv) {
  // Logs go to stderr, so stdout carries only command results (`enqueue`
  // prints the new id alone).
  spdlog::set_default_logger(spdlog::stderr_color_mt("actor-worker"));

  CLI::App app{"actor-worker: durable background jobs on PostgreSQL"};
  // One command; none, or an unknown one, is reported below by name.
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string{"actor-worker "} + AW_VERSION);
  // Global options may also follow the subcommand: `actor-worker run --config x`.
  app.fallthrough();
  common_options common;
  app.add_option("--config", common.config_file, "TOML configuration file")
    ->check(CLI::ExistingFile);
  app.add_option("--database-url", common.database_url,
                 "PostgreSQL URL (wins over DATABASE_URL and the config)");
  app.add_option("--log-level", common.log_level,
                 "trace, debug, info, warn, error or critical")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error",
                           "critical"}));

  auto* migrate_cmd = app.add_subcommand("migrate", "apply schema migrations");
  auto* run_cmd = app.add_subcommand("run", "run a worker until SIGINT/SIGTERM");

  enqueue_options enq;
  auto* enqueue_cmd = app.add_subcommand(
    "enqueue", "enqueue one job and print its id");
  enqueue_cmd->add_option("KIND", enq.kind, "job kind")->required();
  enqueue_cmd->add_option("ARGS_JSON", enq.args, "job args as JSON (default {})");
  enqueue_cmd->add_option("--queue", enq.queue, "queue (default 'default')");
  enqueue_cmd->add_option("--priority", enq.priority,
                          "lower runs first (default 0)");
  enqueue_cmd->add_option("--max-attempts", enq.max_attempts,
                          "run at most N times (1 to 1000000)")
    ->check(CLI::Range(1, aw::defaults::max_attempts_limit));
  enqueue_cmd->add_option("--delay", enq.delay,
                          "run after SECONDS (or a duration: 500ms, 2m)");
  enqueue_cmd->add_flag("--unique", enq.unique,
                        "at most one such job (same kind and args) at a time; "
                        "a duplicate prints the existing job's id");
  enqueue_cmd->add_option("--ordering-key", enq.ordering_key,
                          "jobs with the same key run one at a time, in order");
  enqueue_cmd->add_option("--deadline", enq.deadline,
                          "cancel and rescue a run longer than SECONDS (or a "
                          "duration: 30s, 5m)");

  auto* jobs_cmd = app.add_subcommand("jobs", "inspect jobs");
  jobs_cmd->require_subcommand(1);
  int64_t job_id = 0;
  bool json = false;
  auto* show_cmd = jobs_cmd->add_subcommand("show", "print one job's row");
  show_cmd->add_option("ID", job_id, "job id")->required();
  show_cmd->add_flag("--json", json, "one line of JSON");

  auto* dlq_cmd = app.add_subcommand("dlq", "inspect the dead letter queue");
  dlq_cmd->require_subcommand(1);
  int64_t limit = 100;
  std::string dlq_queue;
  auto* dlq_list_cmd = dlq_cmd->add_subcommand("list", "list dead letters");
  dlq_list_cmd->add_option("--limit", limit, "at most N rows (default 100)")
    ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  dlq_list_cmd->add_option("--queue", dlq_queue, "only this queue");
  dlq_list_cmd->add_flag("--json", json, "a JSON array");

  auto* callback_cmd = app.add_subcommand(
    "callback", "resolve a job waiting for an external callback");
  callback_cmd->require_subcommand(1);
  std::string callback_action;
  std::string callback_id;
  std::string callback_payload;
  using action_help = std::pair<const char*, const char*>;
  for (const auto& entry : std::initializer_list<action_help>{
         {"complete", "complete the job"},
         {"fail", "fail it for good (dead letter queue); the payload's "
                  "\"error\" is the message"},
         {"retry", "make it available again (event retried)"},
         {"resume", "make it available again to go on with the payload (no "
                    "event: its next run fires started and its outcome)"}}) {
    const char* name = entry.first;
    auto* sub = callback_cmd->add_subcommand(name, entry.second);
    sub->add_option("CALLBACK_ID", callback_id, "the job's callback_id")
      ->required();
    sub->add_option("PAYLOAD_JSON", callback_payload,
                    "stored in callback_result");
    sub->callback([&callback_action, name] { callback_action = name; });
  }

  auto commands = [&] {
    std::string names;
    for (auto* sub : app.get_subcommands({}))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    return names;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError&) {
    // A word where a command belongs: say which, and what would do.
    auto extras = app.remaining();
    if (app.get_subcommands().empty() && !extras.empty()
        && extras.front().rfind("-", 0) != 0) {
      std::cerr << "unknown command '" << extras.front()
                << "' (commands: " << commands()
                << "); run with --help for more information" << std::endl;
      return exit_usage;
    }
    return app.exit(CLI::ExtrasError(extras)) == 0 ? exit_ok : exit_usage;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << "no command given (commands: " << commands()
              << "); run with --help for more information" << std::endl;
    return exit_usage;
  }
  spdlog::set_level(spdlog::level::from_str(common.log_level));

  try {
    auto cfg = aw::resolve_config({common.config_file, common.database_url});
    if (*migrate_cmd)
      return migrate_schema(cfg);
    if (*run_cmd)
      return run_worker(cfg);
    if (*enqueue_cmd)
      return enqueue_job(cfg, enq);
    if (*show_cmd)
      return show_job(cfg, job_id, json);
    if (*dlq_list_cmd)
      return list_dead_letters(cfg, limit, dlq_queue, json);
    if (*callback_cmd)
      return resolve_callback(cfg, callback_action, callback_id,
                              callback_payload);
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
