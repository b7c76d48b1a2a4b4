// `actor-worker periodic [--json]`: the [periodic.NAME] schedules of the
// configuration with their last and next run.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/app/periodic_status.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/periodic_schedules.hpp"

namespace aw::cli {

namespace {

std::string text(const nlohmann::json& v) {
  if (v.is_null())
    return "-";
  if (v.is_string())
    return aw::printable(v.get<std::string>());
  return v.dump();
}

} // namespace

int list_periodic(const runtime_config& cfg, const std::string& database,
                  bool json) {
  // Each database's schedules (those whose queue lives there) against its
  // own periodic_schedules rows.
  nlohmann::json schedules = nlohmann::json::array();
  for (auto& name : listed_databases(cfg, database)) {
    auto part = cfg.for_database(name);
    pqxx::connection conn{part.database.url};
    std::vector<periodic_row> rows;
    {
      pqxx::read_transaction tx(conn);
      rows = aw::storage::periodic_rows(tx);
    }
    for (auto& s : periodic_status(part.periodic, rows,
                                   std::chrono::system_clock::now())) {
      if (cfg.sharded())
        s["database"] = name;
      schedules.push_back(std::move(s));
    }
  }
  if (json) {
    std::cout << schedules.dump() << std::endl;
    return exit_ok;
  }
  if (schedules.empty()) {
    std::cerr << "no periodic schedule is configured ([periodic.NAME] "
                 "sections) or recorded\n";
    return exit_ok;
  }
  for (auto& s : schedules) {
    if (s.contains("database"))
      std::cout << "[" << s["database"].get<std::string>() << "] ";
    std::cout << text(s["name"]);
    if (!s["configured"].get<bool>()) {
      std::cout << "  NOT CONFIGURED (a row left by a removed schedule)  cron "
                << text(s["cron"]) << "  timezone " << text(s["timezone"])
                << "  last tick " << text(s["last_tick"]) << "  job "
                << text(s["last_job_id"]) << "\n";
      continue;
    }
    std::cout << "  cron " << text(s["cron"]) << "  timezone "
              << text(s["timezone"]) << "  kind " << text(s["kind"])
              << "  queue " << text(s["queue"]) << "  priority "
              << text(s["priority"]) << "  catch_up " << text(s["catch_up"])
              << "  last tick " << text(s["last_tick"]) << "  job "
              << text(s["last_job_id"])
              << (s["changed"].get<bool>() ? " (before the schedule changed)" : "")
              << "  next tick " << text(s["next_tick"]) << "\n";
  }
  return exit_ok;
}

} // namespace aw::cli
