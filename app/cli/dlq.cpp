// `actor-worker dlq list`.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin.hpp"

namespace aw::cli {

int list_dead_letters(const runtime_config& cfg, int64_t limit,
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
  // One line per dead letter, whatever the job put in its names or message.
  for (auto& r : rows)
    std::cout << "#" << r["id"] << " job " << r["original_job_id"] << " "
              << aw::printable(r["kind"].get<std::string>()) << " queue "
              << aw::printable(r["queue"].get<std::string>()) << " errors "
              << r["error_count"] << " failed_at "
              << r["failed_at"].get<std::string>() << ": "
              << (r["last_error_message"].is_null()
                    ? std::string{}
                    : aw::printable(r["last_error_message"].get<std::string>()))
              << "\n";
  return exit_ok;
}

} // namespace aw::cli
