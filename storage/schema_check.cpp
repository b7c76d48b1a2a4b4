#include "storage/schema_check.hpp"

#include <set>

#include <pqxx/pqxx>

namespace aw::storage {

const std::vector<required_table>& required_schema() {
  static const std::vector<required_table> tables = {
    {"jobs",
     {"id", "kind", "queue", "args", "state", "priority", "run_at",
      "created_at", "attempt", "error_count", "max_attempts",
      "last_error_message", "last_failed_at", "locked_by", "locked_at",
      "finalized_at", "metadata", "tags", "deadline_ms", "deadline_at", "callback_id", "callback_timeout_at",
      "callback_result", "ordering_key", "unique_key", "unique_states"}},
    {"dead_letter_jobs",
     {"id", "original_job_id", "kind", "queue", "args", "priority", "attempt",
      "max_attempts", "error_count", "last_error_message", "created_at",
      "failed_at", "metadata", "tags"}},
  };
  return tables;
}

std::vector<std::string> missing_schema(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn, "aw_schema_check");
  auto rows = tx.exec(
    "SELECT table_name, column_name FROM information_schema.columns "
    "WHERE table_schema = current_schema() "
    "AND table_name IN ('jobs', 'dead_letter_jobs')");
  std::set<std::pair<std::string, std::string>> present;
  std::set<std::string> tables;
  for (const auto& row : rows) {
    tables.insert(row[0].as<std::string>());
    present.emplace(row[0].as<std::string>(), row[1].as<std::string>());
  }
  std::vector<std::string> missing;
  for (const auto& t : required_schema()) {
    if (tables.count(t.table) == 0) {
      missing.push_back(std::string{"table "} + t.table + " is missing");
      continue;
    }
    for (auto column : t.columns)
      if (present.count({t.table, column}) == 0)
        missing.push_back(std::string{"table "} + t.table
                          + " is missing column " + column);
  }
  return missing;
}

std::string describe_missing_schema(const std::vector<std::string>& missing) {
  std::string text = "the database schema is out of date (";
  for (size_t i = 0; i < missing.size(); ++i)
    text += (i > 0 ? "; " : "") + missing[i];
  text += "): run `actor-worker migrate`";
  return text;
}

} // namespace aw::storage
