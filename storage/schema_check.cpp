#include "actor_worker/storage/schema_check.hpp"

#include <set>

#include <pqxx/pqxx>

#include "actor_worker/storage/migrations.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

const std::vector<required_table>& required_schema() {
  static const std::vector<required_table> tables = {
    {"jobs_in",
     {"id", "kind", "queue", "args", "state", "priority", "run_at",
      "created_at", "attempt", "error_count", "max_attempts",
      "last_error_message", "last_failed_at", "finalized_at", "metadata",
      "tags", "deadline_ms", "callback_id", "callback_timeout_at",
      "callback_result", "ordering_key", "unique_key", "unique_states",
      "ready_xid", "batch_id", "slot", "start_unknown", "callback_lease",
      "callback_early"}},
    {"jobs",
     {"id", "kind", "queue", "args", "state", "priority", "run_at",
      "created_at", "attempt", "error_count", "max_attempts",
      "last_error_message", "last_failed_at", "locked_by", "locked_at",
      "finalized_at", "metadata", "tags", "deadline_ms", "callback_id",
      "callback_timeout_at", "callback_result", "ordering_key", "unique_key",
      "unique_states"}},
    {"jobs_live",
     {"id", "kind", "queue", "args", "state", "priority", "run_at",
      "created_at", "attempt", "error_count", "max_attempts",
      "last_error_message", "last_failed_at", "locked_by", "locked_at",
      "finalized_at", "metadata", "tags", "deadline_ms", "callback_id",
      "callback_timeout_at", "callback_result", "ordering_key", "unique_key",
      "unique_states"}},
    {"job_batches",
     {"id", "slot", "queue", "priority", "worker", "claimed_at", "on_lane",
      "tick_lo", "tick_hi", "first_xid", "first_id", "to_xid", "to_id",
      "size", "finished_at", "rescued_at", "tick_done"}},
    {"batch_receipts", {"batch_id", "slot", "done", "bucket", "mask", "at", "worker", "claimed_at"}},
    {"job_starts", {"batch_id", "ids", "at"}},
    {"job_ring", {"singleton", "period", "recycled_at"}},
    {"dead_letter_jobs",
     {"id", "original_job_id", "kind", "queue", "args", "priority", "attempt",
      "max_attempts", "error_count", "last_error_message", "created_at",
      "failed_at", "metadata", "tags", "callback_id", "fingerprint"}},
    {"job_cancel_requests", {"job_id", "requested_at"}},
    {"worker_nodes",
     {"worker_id", "node", "host", "pid", "version", "started_at",
      "last_seen_at", "queues", "kinds", "running", "left_at", "rescued_at",
      "leader"}},
    {"periodic_schedules",
     {"name", "spec", "last_tick", "last_job_id", "enqueued_at"}},
    {"cluster_leader",
     {"singleton", "worker_id", "node", "elected_at", "renewed_at",
      "expires_at"}},
    {"audit_log",
     {"id", "at", "action", "target", "affected", "job_ids", "outcome",
      "remote_addr", "user_agent", "worker"}},
    {"queue_controls",
     {"queue", "paused", "paused_at", "global_concurrency", "rate_limit",
      "rate_period", "updated_at"}},
    {"queue_starts", {"queue", "started_at", "jobs"}},
  };
  return tables;
}

const std::vector<required_function>& required_functions() {
  // Every function of every file of storage/sql/functions/.
  static const std::vector<required_function> functions = [] {
    std::vector<required_function> out;
    for (const auto& f : embedded_functions())
      for (const auto& name : f.defines)
        out.push_back({name.c_str(), -1});
    return out;
  }();
  return functions;
}

namespace {

std::string tables_literal() {
  std::string out = "{";
  for (const auto& t : required_schema())
    out += std::string{out.size() > 1 ? "," : ""} + t.table;
  return out + "}";
}

} // namespace

std::vector<std::string> missing_schema(pqxx::connection_base& conn) {
  pqxx::read_transaction tx(conn, "aw_schema_check");
  // The schema before 0.1 (a `jobs` view over job_rows): one line that
  // says so, rather than every table it lacks.
  if (tx.exec1("SELECT to_regclass('job_rows') IS NOT NULL "
               "AND to_regclass('job_batches') IS NULL")[0]
        .as<bool>())
    return {"this database holds the schema of actor-worker before 0.1, "
            "which 0.1 does not upgrade (`actor-worker migrate` says what "
            "to do)"};
  auto rows = tx.exec_params(sql::schema_columns, tables_literal());
  std::set<std::pair<std::string, std::string>> present;
  std::set<std::string> tables;
  for (const auto& row : rows) {
    auto table = row["table_name"].as<std::string>();
    tables.insert(table);
    present.emplace(table, row["column_name"].as<std::string>());
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
  std::set<std::pair<std::string, int>> functions;
  std::set<std::string> names;
  for (const auto& row : tx.exec(sql::schema_functions)) {
    names.insert(row["proname"].as<std::string>());
    functions.emplace(row["proname"].as<std::string>(),
                      row["pronargs"].as<int>());
  }
  for (auto fn : required_functions()) {
    if (names.count(fn.name) == 0)
      missing.push_back(std::string{"function "} + fn.name + " is missing");
    else if (fn.parameters >= 0
             && functions.count({fn.name, fn.parameters}) == 0)
      missing.push_back(std::string{"function "} + fn.name + " has no "
                        + std::to_string(fn.parameters) + "-parameter form");
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
