#include "actor_worker/storage/admin.hpp"

#include <pqxx/pqxx>

namespace aw::storage {

std::optional<std::string> job_json(pqxx::connection_base& conn, int64_t id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params("SELECT row_to_json(j)::text FROM jobs AS j "
                             "WHERE j.id = $1",
                             id);
  if (rows.empty())
    return std::nullopt;
  return rows[0][0].as<std::string>();
}

std::optional<std::string> dead_letter_for_job_json(pqxx::connection_base& conn,
                                                    int64_t job_id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params("SELECT row_to_json(d)::text "
                             "FROM dead_letter_jobs AS d "
                             "WHERE d.original_job_id = $1 "
                             "ORDER BY d.failed_at DESC LIMIT 1",
                             job_id);
  if (rows.empty())
    return std::nullopt;
  return rows[0][0].as<std::string>();
}

std::string dead_letters_json(pqxx::connection_base& conn, int64_t limit,
                              const std::string& queue) {
  pqxx::read_transaction tx(conn);
  auto row = tx.exec_params1(
    "SELECT coalesce(json_agg(d ORDER BY d.failed_at DESC, d.id DESC), "
    "'[]')::text FROM (SELECT * FROM dead_letter_jobs "
    "WHERE ($2 = '' OR queue = $2) "
    "ORDER BY failed_at DESC, id DESC LIMIT $1) AS d",
    limit, queue);
  return row[0].as<std::string>();
}

} // namespace aw::storage
