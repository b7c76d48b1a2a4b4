// The actor-worker binary: migrate, run, enqueue, and admin commands.
//
// Exit codes: 0 success; 1 a runtime failure (schema out of date, a failed
// statement, a job that does not exist); 2 bad usage or configuration;
// 3 the database is unreachable (one-shot commands only: `run` keeps
// trying instead).

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "app/builtin_kinds.hpp"
#include "app/registry.hpp"
#include "app/runtime.hpp"
#include "config/config.hpp"
#include "messages/error.hpp"
#include "storage/admin.hpp"
#include "storage/callbacks.hpp"
#include "storage/db_error.hpp"
#include "storage/enqueue.hpp"
#include "storage/migrations.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr int exit_unreachable = 3;

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct common_options {
  std::string config_file;
  std::string database_url;
  std::string log_level = "info";
};

/// The config file (or defaults), with the database URL taken from
/// --database-url, DATABASE_URL or the file, in that order.
aw::runtime_config load(const common_options& opts) {
  aw::runtime_config cfg;
  if (!opts.config_file.empty())
    cfg = aw::load_config(opts.config_file);
  else
    cfg.validate();
  if (!opts.database_url.empty())
    cfg.database.url = opts.database_url;
  else if (auto env = std::getenv("DATABASE_URL"); env && *env)
    cfg.database.url = env;
  if (cfg.database.url.empty())
    throw usage_error("no database URL: pass --database-url, set "
                      "DATABASE_URL, or set url in the [database] section "
                      "of the config file");
  return cfg;
}

int run_worker(const aw::runtime_config& cfg) {
  // Signals are taken synchronously by this thread only; block them before
  // CAF starts its threads so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto reg = std::make_shared<aw::registry>();
  // With the URL: also the test/diagnostic kind `record`.
  aw::register_builtin_kinds(*reg, cfg.database.url);

  caf::actor_system_config sys_cfg;
  // [scheduler]: CAF's default is at least 4 threads; handlers that block
  // run on the blocking pool, so the actors need no more than cores.
  aw::configure_actor_system(sys_cfg, cfg.scheduler);
  caf::actor_system sys{sys_cfg};
  std::string queues;
  for (auto& q : cfg.queues)
    queues += (queues.empty() ? "" : ", ") + q.name + " (concurrency "
              + std::to_string(q.concurrency) + ")";
  spdlog::info("starting: node {}, queues {}, kinds {}", cfg.worker.node,
               queues, nlohmann::json(reg->kinds()).dump());
  aw::runtime rt{sys, cfg, reg};
  timespec tick{0, 100'000'000};
  for (;;) {
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("received {}, shutting down gracefully",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
      rt.stop();
      return exit_ok;
    }
    if (auto ended = rt.wait_for(std::chrono::milliseconds{0})) {
      if (*ended) {
        spdlog::critical("worker stopped: {}", aw::render(*ended));
        return exit_failure;
      }
      return exit_ok;
    }
  }
}

int migrate(const aw::runtime_config& cfg) {
  auto report = aw::storage::migrate(cfg.database.url);
  if (report.applied.empty())
    spdlog::info("schema is up to date (version {})", report.to_version);
  for (auto& name : report.applied)
    spdlog::info("applied migration {}", name);
  if (!report.applied.empty())
    spdlog::info("schema migrated from version {} to {}", report.from_version,
                 report.to_version);
  return exit_ok;
}

/// A CLI duration: a bare number means seconds ("30"), else "500ms", "2m".
std::chrono::milliseconds seconds_or_duration(const char* flag,
                                              const std::string& text) {
  try {
    bool bare = text.find_first_not_of("0123456789.") == std::string::npos;
    return aw::parse_duration(bare ? text + "s" : text);
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string{flag} + ": " + e.what());
  }
}

struct enqueue_options {
  std::string kind;
  std::string args = "{}";
  std::string queue = aw::defaults::queue;
  int priority = 0;
  int max_attempts = 0;
  std::string delay;
  std::string deadline;
  bool unique = false;
  std::string ordering_key;
};

int enqueue(const aw::runtime_config& cfg, const enqueue_options& o) {
  nlohmann::json args;
  try {
    args = nlohmann::json::parse(o.args);
  } catch (const std::exception& e) {
    throw usage_error("ARGS_JSON for kind '" + o.kind
                      + "' is not valid JSON: " + e.what());
  }
  aw::insert_options opts;
  opts.queue = o.queue;
  opts.priority = o.priority;
  if (o.max_attempts != 0)
    opts.max_attempts = o.max_attempts;
  if (!o.delay.empty())
    opts.delay = seconds_or_duration("--delay", o.delay);
  if (!o.deadline.empty())
    opts.deadline = seconds_or_duration("--deadline", o.deadline);
  if (o.unique)
    opts.unique = aw::unique_options{};
  if (!o.ordering_key.empty())
    opts.ordering_key = o.ordering_key;
  pqxx::connection conn{cfg.database.url};
  pqxx::work tx{conn};
  int64_t id;
  try {
    id = aw::enqueue(tx, o.kind, args, opts);
  } catch (const std::invalid_argument& e) {
    throw usage_error(e.what());
  }
  tx.commit();
  std::cout << id << std::endl;
  return exit_ok;
}

/// Resolves a callback without hooks: the CLI has no worker, so it changes
/// the job and inserts no follow-ups and fires no hook (as the spec says of
/// resolutions outside a worker process).
int resolve_callback(const aw::runtime_config& cfg, const std::string& action,
                     const std::string& callback_id,
                     const std::string& payload_text) {
  nlohmann::json payload;
  if (!payload_text.empty()) {
    try {
      payload = nlohmann::json::parse(payload_text);
    } catch (const std::exception& e) {
      throw usage_error("PAYLOAD_JSON is not valid JSON: "
                        + std::string{e.what()});
    }
  }
  std::string error;
  if (action == "fail")
    error = payload.is_object() ? payload.value("error", std::string{})
            : payload.is_string() ? payload.get<std::string>()
                                  : std::string{};
  pqxx::connection conn{cfg.database.url};
  pqxx::work tx{conn};
  try {
    auto e = aw::storage::resolve_callback(
      tx, callback_id, aw::storage::parse_callback_action(action), payload,
      error);
    tx.commit();
    auto job = nlohmann::json::parse(e.job_json);
    std::cout << "job "
              << job.value(job.contains("original_job_id") ? "original_job_id"
                                                           : "id",
                           int64_t{0})
              << ": " << aw::to_string(e.type) << std::endl;
    return exit_ok;
  } catch (const aw::storage::callback_error& e) {
    spdlog::error("{}", e.what());
    return exit_failure;
  }
}

int show_job(const aw::runtime_config& cfg, int64_t id, bool json) {
  pqxx::connection conn{cfg.database.url};
  auto row = aw::storage::job_json(conn, id);
  if (!row) {
    if (auto dead = aw::storage::dead_letter_for_job_json(conn, id)) {
      std::cerr << "job " << id
                << " is no longer in the jobs table: it was moved to the dead "
                   "letter queue:\n"
                << nlohmann::json::parse(*dead).dump(2) << "\n";
    } else {
      std::cerr << "job " << id
                << " not found in the jobs table (never enqueued, or deleted "
                   "after its completed retention)\n";
    }
    return exit_failure;
  }
  auto parsed = nlohmann::json::parse(*row);
  std::cout << (json ? parsed.dump() : parsed.dump(2)) << std::endl;
  return exit_ok;
}

int list_dead_letters(const aw::runtime_config& cfg, int64_t limit,
                      const std::string& queue, bool json) {
  pqxx::connection conn{cfg.database.url};
  auto rows = nlohmann::json::parse(
    aw::storage::dead_letters_json(conn, limit, queue));
  if (json) {
    std::cout << rows.dump() << std::endl;
    return exit_ok;
  }
  if (rows.empty())
    std::cout << "the dead letter queue is empty\n";
  for (auto& r : rows)
    std::cout << "#" << r["id"] << " job " << r["original_job_id"] << " "
              << r["kind"].get<std::string>() << " queue "
              << r["queue"].get<std::string>() << " errors "
              << r["error_count"] << " failed_at "
              << r["failed_at"].get<std::string>() << ": "
              << (r["last_error_message"].is_null()
                    ? std::string{}
                    : r["last_error_message"].get<std::string>())
              << "\n";
  return exit_ok;
}

} // namespace

int main(int argc, char** argv) {
  // Logs go to stderr, so stdout carries only command results (`enqueue`
  // prints the new id alone).
  spdlog::set_default_logger(spdlog::stderr_color_mt("actor-worker"));

  CLI::App app{"actor-worker: durable background jobs on PostgreSQL"};
  app.require_subcommand(1);
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
                          "run at most N times")
    ->check(CLI::PositiveNumber);
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
  dlq_list_cmd->add_option("--limit", limit, "at most N rows (default 100)");
  dlq_list_cmd->add_option("--queue", dlq_queue, "only this queue");
  dlq_list_cmd->add_flag("--json", json, "a JSON array");

  auto* callback_cmd = app.add_subcommand(
    "callback", "resolve a job waiting for an external callback");
  callback_cmd->require_subcommand(1);
  std::string callback_action;
  std::string callback_id;
  std::string callback_payload;
  for (auto* name : {"complete", "fail", "retry"}) {
    auto* sub = callback_cmd->add_subcommand(
      name, std::string{name == std::string{"complete"} ? "complete the job"
                        : name == std::string{"fail"}
                          ? "fail it for good (dead letter queue); the "
                            "payload's \"error\" is the message"
                          : "make it available again"});
    sub->add_option("CALLBACK_ID", callback_id, "the job's callback_id")
      ->required();
    sub->add_option("PAYLOAD_JSON", callback_payload,
                    "stored in callback_result");
    sub->callback([&callback_action, name] { callback_action = name; });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  spdlog::set_level(spdlog::level::from_str(common.log_level));

  try {
    auto cfg = load(common);
    if (*migrate_cmd)
      return migrate(cfg);
    if (*run_cmd)
      return run_worker(cfg);
    if (*enqueue_cmd)
      return enqueue(cfg, enq);
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
