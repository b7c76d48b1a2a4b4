#include "actor_worker/storage/admin_dead_letters.hpp"

#include <pqxx/pqxx>

#include "actor_worker/config/seconds.hpp"

#include "sql_statements.hpp"

namespace aw::storage {

std::optional<std::string> dead_letter_for_job_json(pqxx::connection_base& conn,
                                                    int64_t job_id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params(sql::admin_dead_letter_of_job, job_id);
  if (rows.empty())
    return std::nullopt;
  return rows[0]["dead_letter"].as<std::string>();
}

std::optional<std::string> dead_letter_json(pqxx::connection_base& conn,
                                            int64_t id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params(sql::admin_dead_letter, id);
  if (rows.empty())
    return std::nullopt;
  return rows[0]["dead_letter"].as<std::string>();
}

std::string dead_letters_json(pqxx::connection_base& conn, int64_t limit,
                              const std::string& queue) {
  pqxx::read_transaction tx(conn);
  auto row = tx.exec_params1(sql::admin_dead_letters, limit, queue);
  return row["dead_letters"].as<std::string>();
}

std::vector<retried_dead_letter>
retry_dead_letters(pqxx::connection_base& conn,
                   const dead_letter_filter& filter) {
  pqxx::work tx(conn);
  auto out = retry_dead_letters(tx, filter);
  tx.commit();
  return out;
}

std::vector<retried_dead_letter>
retry_dead_letters(pqxx::transaction_base& tx,
                   const dead_letter_filter& filter) {
  // The insert through `jobs` wakes the queues (its NOTIFY trigger).
  auto rows = tx.exec_params(sql::admin_dead_letters_retry, filter.id,
                             filter.queue, filter.kind, filter.fingerprint);
  std::vector<retried_dead_letter> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    retried_dead_letter r;
    r.dead_letter_id = row["dead_letter_id"].as<int64_t>();
    r.original_job_id = row["original_job_id"].as<int64_t>();
    r.job_id = row["id"].as<int64_t>();
    r.kind = row["kind"].as<std::string>();
    r.queue = row["queue"].as<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

int64_t purge_dead_letters(pqxx::connection_base& conn,
                           std::optional<std::chrono::milliseconds> older_than,
                           const std::string& queue) {
  pqxx::work tx(conn);
  double seconds = older_than ? fractional_seconds(*older_than)
                              : -1.0;
  auto result = tx.exec_params0(sql::admin_dead_letters_purge, seconds, queue);
  tx.commit();
  return static_cast<int64_t>(result.affected_rows());
}

} // namespace aw::storage
