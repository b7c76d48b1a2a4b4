#include "actor_worker/storage/schema_check.hpp"

#include <set>

#include <pqxx/pqxx>

#include "sql_statements.hpp"

namespace aw::storage {

const std::vector<required_table>& required_schema() {
  static const std::vector<required_table> tables = {
    {"job_rows",
     {"id", "kind", "queue", "args", "state", "priority", "run_at",
      "created_at", "attempt", "error_count", "max_attempts",
      "last_error_message", "last_failed_at", "locked_by", "locked_at",
      "finalized_at", "metadata", "tags", "deadline_ms", "deadline_at",
      "callback_id", "callback_timeout_at", "callback_result", "ordering_key",
      "unique_key", "unique_states", "ready_xid", "args_bytes", "lane_gen"}},
    {"lane_generations", {"gen", "started_at", "added_xid"}},
    {"claim_cursors", {"queue", "priority", "last_xid", "last_id"}},
    {"claim_batches",
     {"id", "queue", "priority", "lo_xid", "lo_id", "hi_xid", "hi_id",
      "worker", "size", "remaining", "bytes", "heartbeat_at", "closed_at"}},
    {"batch_completions", {"batch_id", "finalized_at", "ids"}},
    {"jobs",
     {"id", "kind", "queue", "args", "state", "priority", "run_at",
      "created_at", "attempt", "error_count", "max_attempts",
      "last_error_message", "last_failed_at", "locked_by", "locked_at",
      "finalized_at", "metadata", "tags", "deadline_ms", "deadline_at", "callback_id", "callback_timeout_at",
      "callback_result", "ordering_key", "unique_key", "unique_states"}},
    {"dead_letter_jobs",
     {"id", "original_job_id", "kind", "queue", "args", "priority", "attempt",
      "max_attempts", "error_count", "last_error_message", "created_at",
      "failed_at", "metadata", "tags", "callback_id", "fingerprint"}},
    {"job_cancel_requests", {"job_id", "requested_at"}},
    {"worker_nodes",
     {"worker_id", "node", "host", "pid", "version", "started_at",
      "last_seen_at", "queues", "running", "leader"}},
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
    // Packs (migrations/020).
    {"job_packs",
     {"first_id", "queue", "priority", "ready_xid", "n", "kinds", "args",
      "created_at", "unpacked"}},
  };
  return tables;
}

const std::vector<required_function>& required_functions() {
  static const std::vector<required_function> functions = {
    {"actor_worker_claim", 8},          {"actor_worker_finish_lane", 6},
    {"actor_worker_release_lane", 4},   {"actor_worker_expire_batches", 2},
    {"actor_worker_cleanup_lanes", 2}, {"actor_worker_finish_and_claim", 12},
    {"actor_worker_batch_jobs", 3},     {"actor_worker_row_json", 1},
    {"actor_worker_retry_backoff", 1},  {"actor_worker_dead_letter", 2},
    // Announces pauses (migrations/016); the CLI no longer sends its own.
    {"actor_worker_queue_controls_notify", 0},
    // Lane partitions (migrations/019).
    {"actor_worker_rotate_lanes", 1},
    {"actor_worker_lane_partition_chores", 1},
    // Packs (migrations/020).
    {"actor_worker_unpack", 1},
    {"actor_worker_packed_jobs", 1},
    {"actor_worker_pack_ids", 1}};
  // Not asked for: actor_worker_claim_unlimited (008's claim as 013 renamed
  // it), called by nothing since 016's claim reads the controls itself.
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
