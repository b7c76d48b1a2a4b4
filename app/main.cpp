// The actor-worker binary: the command line (CLI11) and the mapping of
// errors to exit codes; each command lives in app/cli/.

#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/app/cli/cli.hpp"
#include "actor_worker/app/cli/log_sink.hpp"
#include "actor_worker/app/log_format.hpp"
#include "actor_worker/app/utf8.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/db_error.hpp"
#include "actor_worker/storage/migrations.hpp"

using namespace aw::cli;

namespace {

struct common_options {
  std::string config_file;
  std::string database_url;
  /// --database NAME: a database of the file ("default" is [database]).
  std::string database;
  std::string log_level = "info";
};

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

} // namespace

int main(int argc, char** argv) {
  // Logs go to stderr, so stdout carries only command results (`enqueue`
  // prints the new id alone).
  install_stderr_logger();

  CLI::App app{"actor-worker: durable background jobs on PostgreSQL"};
  // One command; none, or an unknown one, is reported below by name.
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string{"actor-worker "} + AW_VERSION);
  // Global options may also follow the subcommand: `actor-worker run --config x`.
  app.fallthrough();
  common_options common;
  // The global options, on the app and on every command (so each command's
  // --help lists them).
  auto add_globals = [&common](CLI::App* cmd) {
    const char* group = "Global options";
    cmd->add_option("--config", common.config_file, "TOML configuration file")
      ->check(CLI::ExistingFile)
      ->group(group);
    cmd->add_option("--database-url", common.database_url,
                    "PostgreSQL URL (wins over DATABASE_URL and the config)")
      ->group(group);
    cmd->add_option("--database", common.database,
                    "with queues sharded across databases: the database a "
                    "command works on (\"default\" is [database]; default: "
                    "the queue's database, or [database])")
      ->group(group);
    cmd->add_option("--log-level", common.log_level,
                    "trace, debug, info, warn, error or critical")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error",
                             "critical"}))
      ->group(group);
  };
  add_globals(&app);
  // A command with commands of its own: one of them, named below when
  // missing or unknown.
  auto add_group = [&](const char* name, const char* help) {
    auto* group = app.add_subcommand(name, help);
    group->require_subcommand(0, 1);
    add_globals(group);
    return group;
  };
  auto add_command = [&](CLI::App* parent, const char* name,
                         const char* help) {
    auto* cmd = parent->add_subcommand(name, help);
    add_globals(cmd);
    return cmd;
  };

  auto* migrate_cmd = add_command(&app, "migrate", "apply schema migrations");
  auto* run_cmd = add_command(&app, "run",
                              "run a worker until SIGINT/SIGTERM");
  std::string node;
  run_cmd->add_option("--node", node,
                      "the node of a cluster file to run (default: [worker] "
                      "node, then the host name)");
  bool nodes_json = false;
  auto* nodes_cmd = add_command(
    &app, "nodes", "list the worker processes of the cluster (alive or dead)");
  nodes_cmd->add_flag("--json", nodes_json,
                      "a JSON array of objects keyed by column name");
  bool queues_json = false;
  std::string control_queue;
  auto* queues_cmd = add_group(
    "queues",
    "list every queue: jobs by state, age of the oldest available job, "
    "running per node, paused or not, cluster-wide limits");
  queues_cmd->add_flag("--json", queues_json,
                       "a JSON array of objects, one per queue");
  auto* pause_cmd = add_command(
    queues_cmd, "pause",
    "pause QUEUE on every node: no new job of it starts; running jobs "
    "finish");
  pause_cmd->add_option("QUEUE", control_queue, "the queue")->required();
  auto* resume_cmd = add_command(queues_cmd, "resume",
                                 "resume QUEUE on every node at once");
  resume_cmd->add_option("QUEUE", control_queue, "the queue")->required();
  bool periodic_json = false;
  auto* periodic_cmd = add_command(
    &app, "periodic",
    "list the periodic schedules ([periodic.NAME]) with their last and next "
    "run");
  periodic_cmd->add_flag("--json", periodic_json,
                         "a JSON array of objects (keys in the README)");
  bool check_json = false;
  auto* check_cmd = add_command(
    &app, "check",
    "validate the config file (every node of a cluster) and print what each "
    "node would run; connects nowhere");
  check_cmd->add_flag("--json", check_json, "print a JSON document");

  enqueue_options enq;
  auto* enqueue_cmd = add_command(
    &app, "enqueue",
    "enqueue one job and print its id (or many from JSON lines: --jsonl)");
  enqueue_cmd->add_option("KIND", enq.kind, "job kind");
  enqueue_cmd->add_option("ARGS_JSON", enq.args,
                          "job args as a JSON object (default {}); @FILE "
                          "reads them from FILE, - from stdin");
  enqueue_cmd->add_option("--queue", enq.queue, "queue (default 'default')");
  enqueue_cmd->add_option("--priority", enq.priority,
                          "lower runs first (default 0)");
  enqueue_cmd->add_option("--max-attempts", enq.max_attempts,
                          "run at most N times (1 to 1000000)")
    ->check(CLI::Range(1, aw::defaults::max_attempts_limit));
  enqueue_cmd->add_option("--delay", enq.delay,
                          "run after SECONDS (or a duration: 500ms, 2m)");
  enqueue_cmd->add_option("--run-at", enq.run_at,
                          "run at or after TIME, an RFC 3339 timestamp "
                          "(2030-01-02T03:04:05Z); excludes --delay");
  enqueue_cmd->add_option("--tags", enq.tags, "tags, comma-separated: a,b");
  enqueue_cmd->add_option("--metadata", enq.metadata,
                          "a JSON object stored with the job");
  enqueue_cmd->add_flag("--unique", enq.unique,
                        "at most one such job (same kind and args) at a time; "
                        "a duplicate prints the existing job's id (and says "
                        "so on stderr)");
  auto* ordering_key_opt = enqueue_cmd->add_option(
    "--ordering-key", enq.ordering_key,
    "jobs with the same key run one at a time, in order (not empty)");
  enqueue_cmd->add_option("--deadline", enq.deadline,
                          "cancel and rescue a run longer than SECONDS (or a "
                          "duration: 30s, 5m)");
  enqueue_cmd->add_option("--jsonl", enq.jsonl,
                          "enqueue every job of FILE (- for stdin), one JSON "
                          "object per line, in one transaction; prints the "
                          "count (the flags above are defaults for its lines)");

  int64_t job_id = 0;
  bool json = false;
  auto* jobs_cmd = add_group("jobs", "list, inspect, cancel and retry jobs");
  jobs_list_options list;
  auto* list_cmd = add_command(jobs_cmd, "list",
                               "list jobs in id order, a page at a time");
  list_cmd->add_option("--state", list.state,
                       "only jobs in this state (scheduled, available, "
                       "running, waiting_external, completed, cancelled)");
  list_cmd->add_option("--queue", list.queue, "only this queue");
  list_cmd->add_option("--kind", list.kind, "only this kind");
  list_cmd->add_option("--limit", list.limit, "at most N rows (default 100)")
    ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  list_cmd->add_option("--after", list.after,
                       "only ids greater than ID (the next page: the last id "
                       "shown)")
    ->check(CLI::NonNegativeNumber);
  list_cmd->add_flag("--json", list.json,
                     "a JSON array of objects keyed by the jobs columns");
  auto* show_cmd = add_command(jobs_cmd, "show", "print one job's row");
  show_cmd->add_option("ID", job_id, "job id")->required();
  show_cmd->add_flag("--json", json, "one line of JSON");
  std::string cancel_wait;
  auto* cancel_cmd = add_command(
    jobs_cmd, "cancel",
    "cancel a job: at once if it waits, through its worker if it runs");
  cancel_cmd->add_option("ID", job_id, "job id")->required();
  cancel_cmd->add_option("--wait", cancel_wait,
                         "how long to wait for a running job to end "
                         "(default 10s; 0: do not wait)");
  cancel_cmd->add_flag("--json", json, "one line of JSON");
  auto* retry_cmd = add_command(
    jobs_cmd, "retry",
    "run a job now: a scheduled one at once, a finished one again");
  retry_cmd->add_option("ID", job_id, "job id")->required();
  retry_cmd->add_flag("--json", json, "one line of JSON");

  auto* dlq_cmd = add_group("dlq", "inspect, retry and purge dead letters");
  int64_t limit = 100;
  std::string dlq_queue;
  auto* dlq_list_cmd = add_command(dlq_cmd, "list", "list dead letters");
  dlq_list_cmd->add_option("--limit", limit, "at most N rows (default 100)")
    ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  dlq_list_cmd->add_option("--queue", dlq_queue, "only this queue");
  dlq_list_cmd->add_flag("--json", json, "a JSON array");
  int64_t dead_id = 0;
  auto* dlq_show_cmd = add_command(dlq_cmd, "show", "print one dead letter");
  dlq_show_cmd->add_option("ID", dead_id,
                           "dead letter id (as `dlq list` shows it)")
    ->required();
  dlq_show_cmd->add_flag("--json", json, "one line of JSON");
  dlq_retry_options dlq_retry;
  auto* dlq_retry_cmd = add_command(
    dlq_cmd, "retry",
    "move dead letters back into jobs as fresh jobs (one transaction)");
  dlq_retry_cmd->add_option("ID", dlq_retry.id,
                            "dead letter id (as `dlq list` shows it)")
    ->check(CLI::PositiveNumber);
  dlq_retry_cmd->add_flag("--all", dlq_retry.all,
                          "every dead letter (of --queue, --kind and "
                          "--fingerprint)");
  dlq_retry_cmd->add_option("--queue", dlq_retry.queue,
                            "with --all: only this queue");
  dlq_retry_cmd->add_option("--kind", dlq_retry.kind,
                            "with --all: only this kind");
  dlq_retry_cmd->add_option("--fingerprint", dlq_retry.fingerprint,
                            "with --all: only this error fingerprint (a "
                            "failure group of the dashboard)");
  dlq_retry_cmd->add_flag("--json", dlq_retry.json,
                          "a JSON array: dead_letter_id, original_job_id, "
                          "job_id, kind, queue");
  std::string purge_before;
  auto* dlq_purge_cmd = add_command(dlq_cmd, "purge",
                                    "delete dead letters; prints the count");
  dlq_purge_cmd->add_option("--before", purge_before,
                            "only those that failed longer than DURATION "
                            "ago (7d, 12h; bare number: seconds)");
  dlq_purge_cmd->add_option("--queue", dlq_queue, "only this queue");
  dlq_purge_cmd->add_flag("--json", json, "{\"purged\": N}");

  auto* callback_cmd = add_group(
    "callback", "resolve a job waiting for an external callback");
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
    auto* sub = add_command(callback_cmd, name, entry.second);
    sub->add_option("CALLBACK_ID", callback_id, "the job's callback_id")
      ->required();
    sub->add_option("PAYLOAD_JSON", callback_payload,
                    "stored in callback_result; @FILE reads it from FILE, - "
                    "from stdin");
    sub->callback([&callback_action, name] { callback_action = name; });
  }

  // A command group given without one of its commands, or with one it
  // does not have: say which, and what would do.
  auto group_without_command = [&](const std::vector<std::string>& extras) {
    auto* at = innermost(app);
    if (at == &app || at->get_subcommands({}).empty())
      return false;
    // `queues` alone lists the queues.
    if (at == queues_cmd && extras.empty())
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
  };
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
    if (group_without_command(extras))
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
  if (group_without_command({}))
    return exit_usage;
  try {
    require_utf8(app);
  } catch (const usage_error& e) {
    std::cerr << e.what() << std::endl;
    return exit_usage;
  }
  spdlog::set_level(spdlog::level::from_str(common.log_level));

  try {
    if (*check_cmd)
      return check_config(common.config_file, check_json);
    aw::config_sources sources;
    sources.file = common.config_file;
    sources.database_url = common.database_url;
    sources.node = node;
    sources.select_node = run_cmd->parsed();
    auto full = aw::resolve_config(sources);
    aw::configure_log_format(full.log);
    // One-shot commands work on one database: --database, else the
    // database of the queue they name, else [database].
    auto on = [&](const std::string& queue) {
      return full.routed(common.database, queue);
    };
    if (*migrate_cmd)
      return migrate_schema(full, common.database);
    if (*run_cmd) {
      if (!common.database.empty())
        throw usage_error("--database does not go with `run`: a node runs "
                          "the queues of every database its file maps them "
                          "to");
      return run_worker(full);
    }
    // The listings cover every database unless --database names one.
    if (*nodes_cmd)
      return list_nodes(full, common.database, nodes_json);
    if (*pause_cmd)
      return control_queue_cmd(on(control_queue), control_queue, true);
    if (*resume_cmd)
      return control_queue_cmd(on(control_queue), control_queue, false);
    if (*queues_cmd)
      return list_queues(full, common.database, queues_json);
    if (*periodic_cmd)
      return list_periodic(full, common.database, periodic_json);
    if (*enqueue_cmd) {
      enq.ordering_key_given = ordering_key_opt->count() > 0;
      return enqueue_job(on(enq.queue), enq);
    }
    if (*list_cmd)
      return list_jobs(on(list.queue), list);
    if (*show_cmd)
      return show_job(on(""), job_id, json);
    if (*cancel_cmd)
      return cancel_job(on(""), job_id, cancel_wait, json);
    if (*retry_cmd)
      return retry_job(on(""), job_id, json);
    if (*dlq_list_cmd)
      return list_dead_letters(on(dlq_queue), limit, dlq_queue, json);
    if (*dlq_show_cmd)
      return show_dead_letter(on(""), dead_id, json);
    if (*dlq_retry_cmd)
      return retry_dead_letters(on(dlq_retry.queue), dlq_retry);
    if (*dlq_purge_cmd)
      return purge_dead_letters(on(dlq_queue), purge_before, dlq_queue, json);
    if (*callback_cmd)
      return resolve_callback(full, common.database, callback_action,
                              callback_id, callback_payload);
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
