// `actor-worker callback complete|fail|retry|resume`.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/callbacks.hpp"

namespace aw::cli {

/// Resolves a callback without hooks: the CLI has no worker, so it changes
/// the job and inserts no follow-ups and fires no hook (as the spec says of
/// resolutions outside a worker process).
int resolve_callback(const runtime_config& cfg, const std::string& database,
                     const std::string& action,
                     const std::string& callback_id,
                     const std::string& payload_text) {
  if (!aw::storage::is_callback_id(callback_id))
    throw usage_error("CALLBACK_ID '" + callback_id
                      + "' is not a callback id (expected a UUID such as "
                        "0b5e5c3e-6f1a-4c1e-9d7e-2a3b4c5d6e7f)");
  nlohmann::json payload;
  // Text, or @FILE / - (stdin): an argument holds at most 128 KiB.
  std::string text = payload_text;
  std::string from = "PAYLOAD_JSON";
  if (text == "-" || (!text.empty() && text.front() == '@')) {
    auto path = text == "-" ? std::string{"-"} : text.substr(1);
    text = read_source("PAYLOAD_JSON", path);
    from = path == "-" ? "PAYLOAD_JSON (stdin)"
                       : "PAYLOAD_JSON (" + aw::printable(path) + ")";
  }
  if (!payload_text.empty()) {
    check_json_depth(from, text);
    try {
      payload = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw usage_error(from + " is not valid JSON: " + std::string{e.what()});
    }
  }
  std::string error;
  if (action == "fail")
    error = payload.is_object() ? payload.value("error", std::string{})
            : payload.is_string() ? payload.get<std::string>()
                                  : std::string{};
  // --database, or every database in turn until one knows the id.
  auto names = database.empty() ? cfg.database_names()
                                : std::vector<std::string>{database};
  for (size_t i = 0; i < names.size(); ++i) {
    pqxx::connection conn{cfg.database_named(names[i]).url};
    pqxx::work tx{conn};
    try {
      auto resolved = aw::storage::resolve_callback(
        tx, callback_id, aw::storage::parse_callback_action(action), payload,
        error);
      tx.commit();
      // The event the resolution fires (none for resume, which only puts
      // the job back: its next run fires its own).
      auto job = nlohmann::json::parse(resolved.row_json);
      if (resolved.kept) {
        std::cout << "job " << job.value("id", int64_t{0})
                  << ": still running; " << aw::storage::to_string(resolved.action)
                  << " kept for when it parks" << std::endl;
        return exit_ok;
      }
      std::cout << "job "
                << job.value(job.contains("original_job_id")
                               ? "original_job_id"
                               : "id",
                             int64_t{0})
                << ": "
                << (resolved.has_event ? aw::to_string(resolved.event.type)
                                       : "resumed")
                << std::endl;
      return exit_ok;
    } catch (const aw::storage::callback_error& e) {
      if (e.code() == aw::ec::callback_not_found && i + 1 < names.size())
        continue;
      spdlog::error("{}{}", cfg.sharded() && names.size() > 1
                              ? "in every database: " : "",
                    e.what());
      return exit_failure;
    }
  }
  return exit_failure;
}

} // namespace aw::cli
