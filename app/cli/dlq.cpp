// `actor-worker dlq list|show|retry|purge`.

#include "actor_worker/app/cli/cli.hpp"

#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/admin_dead_letters.hpp"

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

int show_dead_letter(const runtime_config& cfg, int64_t id, bool json) {
  pqxx::connection conn{cfg.database.url};
  auto row = aw::storage::dead_letter_json(conn, id);
  if (!row) {
    std::cerr << "dead letter " << id
              << " not found (ids as `actor-worker dlq list` shows them; "
                 "retried and purged dead letters are gone)\n";
    return exit_failure;
  }
  auto parsed = nlohmann::json::parse(*row);
  std::cout << (json ? parsed.dump() : parsed.dump(2)) << std::endl;
  return exit_ok;
}

int retry_dead_letters(const runtime_config& cfg, const dlq_retry_options& o) {
  if (o.all && o.id != 0)
    throw usage_error("dlq retry: give an ID or --all, not both");
  if (!o.all && o.id == 0)
    throw usage_error("dlq retry: give the ID of a dead letter (as `dlq "
                      "list` shows it), or --all [--queue Q] [--kind K] "
                      "[--fingerprint F]");
  if (!o.all
      && (!o.queue.empty() || !o.kind.empty() || !o.fingerprint.empty()))
    throw usage_error("dlq retry: --queue, --kind and --fingerprint go with "
                      "--all");
  pqxx::connection conn{cfg.database.url};
  aw::storage::dead_letter_filter filter{o.all ? 0 : o.id, o.queue, o.kind,
                                         o.fingerprint};
  auto retried = aw::storage::retry_dead_letters(conn, filter);
  if (!o.all && retried.empty()) {
    std::cerr << "dead letter " << o.id
              << " not found (ids as `actor-worker dlq list` shows them)\n";
    return exit_failure;
  }
  if (o.json) {
    auto out = nlohmann::json::array();
    for (auto& r : retried)
      out.push_back({{"dead_letter_id", r.dead_letter_id},
                     {"original_job_id", r.original_job_id},
                     {"job_id", r.job_id},
                     {"kind", r.kind},
                     {"queue", r.queue}});
    std::cout << out.dump() << std::endl;
    return exit_ok;
  }
  if (o.all) {
    std::cout << retried.size() << std::endl;
    std::cerr << retried.size() << " dead letter(s) moved back into jobs\n";
    return exit_ok;
  }
  // The new job's id alone, as `enqueue` prints it.
  std::cout << retried.front().job_id << std::endl;
  return exit_ok;
}

int purge_dead_letters(const runtime_config& cfg, const std::string& before,
                       const std::string& queue, bool json) {
  std::optional<std::chrono::milliseconds> older_than;
  if (!before.empty())
    older_than = seconds_or_duration("--before", before);
  pqxx::connection conn{cfg.database.url};
  auto n = aw::storage::purge_dead_letters(conn, older_than, queue);
  if (json)
    std::cout << nlohmann::json{{"purged", n}}.dump() << std::endl;
  else
    std::cout << n << std::endl;
  return exit_ok;
}

} // namespace aw::cli
