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

} // namespace aw::cli
