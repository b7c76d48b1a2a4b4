#include "actor_worker/storage/admin_nodes.hpp"

#include <pqxx/pqxx>

#include "actor_worker/config/seconds.hpp"

#include "sql_statements.hpp"

namespace aw::storage {

std::string nodes_json(pqxx::connection_base& conn,
                       std::chrono::milliseconds reclaim_window) {
  pqxx::read_transaction tx(conn);
  auto row = tx.exec_params1(sql::nodes_list,
                             fractional_seconds(reclaim_window));
  return row["nodes"].as<std::string>();
}

bool kind_unserved(pqxx::connection_base& conn, const std::string& kind,
                   const std::string& queue,
                   std::chrono::milliseconds reclaim_window) {
  pqxx::read_transaction tx(conn);
  auto row = tx.exec_params1(sql::kind_unserved, kind, queue,
                             fractional_seconds(reclaim_window));
  return row["unserved"].as<bool>();
}

} // namespace aw::storage
