#include "actor_worker/storage/admin.hpp"

#include <pqxx/pqxx>

#include "sql_statements.hpp"

namespace aw::storage {

std::optional<std::string> job_json(pqxx::connection_base& conn, int64_t id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params(sql::admin_job, id);
  if (rows.empty())
    return std::nullopt;
  return rows[0]["job"].as<std::string>();
}

std::optional<std::string> dead_letter_for_job_json(pqxx::connection_base& conn,
                                                    int64_t job_id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params(sql::admin_dead_letter_of_job, job_id);
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

} // namespace aw::storage
