// `actor-worker jobs show`.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/storage/admin.hpp"

namespace aw::cli {

int show_job(const runtime_config& cfg, int64_t id, bool json) {
  pqxx::connection conn{cfg.database.url};
  auto row = aw::storage::job_json(conn, id);
  if (!row) {
    if (auto dead = aw::storage::dead_letter_for_job_json(conn, id)) {
      // Found, in the dead letter queue: its dead letter row (keys = the
      // columns of dead_letter_jobs) with "state": "dead_lettered".
      auto letter = nlohmann::json::parse(*dead);
      letter["state"] = "dead_lettered";
      if (!json)
        std::cerr << "job " << id
                  << " is no longer in the jobs table: it was moved to the "
                     "dead letter queue\n";
      std::cout << (json ? letter.dump() : letter.dump(2)) << std::endl;
      return exit_ok;
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

} // namespace aw::cli
