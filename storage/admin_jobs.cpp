#include "actor_worker/storage/admin_jobs.hpp"

#include <pqxx/pqxx>

#include "sql_statements.hpp"

namespace aw::storage {

const std::vector<std::string>& job_states() {
  static const std::vector<std::string> states = {
    "scheduled", "available", "running", "waiting_external", "completed",
    "cancelled"};
  return states;
}

std::optional<std::string> job_json(pqxx::connection_base& conn, int64_t id) {
  pqxx::read_transaction tx(conn);
  auto rows = tx.exec_params(sql::admin_job, id);
  if (rows.empty())
    return std::nullopt;
  return rows[0]["job"].as<std::string>();
}

std::string jobs_json(pqxx::connection_base& conn, const job_filter& f) {
  pqxx::read_transaction tx(conn);
  return tx.exec_params1(sql::admin_jobs_list, f.after, f.state, f.queue,
                         f.kind, f.limit)["jobs"]
    .as<std::string>();
}

namespace {

std::optional<job_position> read_state(pqxx::transaction_base& tx,
                                       int64_t id) {
  auto rows = tx.exec_params(sql::admin_job_state, id);
  if (rows.empty())
    return std::nullopt;
  job_position p;
  p.state = rows[0]["state"].as<std::string>();
  p.locked_by = rows[0]["locked_by"].as<std::string>(std::string{});
  return p;
}

bool waits(const std::string& state) {
  return state == "scheduled" || state == "available"
         || state == "waiting_external";
}

} // namespace

std::optional<job_position> job_state(pqxx::connection_base& conn,
                                      int64_t id) {
  pqxx::read_transaction tx(conn);
  return read_state(tx, id);
}

std::optional<job_position> preexisting_job(pqxx::transaction_base& tx,
                                            int64_t id) {
  auto rows = tx.exec_params(sql::admin_job_preexisting, id);
  if (rows.empty())
    return std::nullopt;
  job_position p;
  p.state = rows[0]["state"].as<std::string>();
  p.locked_by = rows[0]["locked_by"].as<std::string>(std::string{});
  return p;
}

cancel_report cancel_job(pqxx::connection_base& conn, int64_t id,
                         const std::string& notify_channel,
                         const std::string& cancel_channel) {
  pqxx::work tx(conn);
  auto report = cancel_job(tx, id, notify_channel, cancel_channel);
  if (report.result == cancel_result::cancelled
      || report.result == cancel_result::requested)
    tx.commit();
  return report;
}

cancel_report cancel_job(pqxx::transaction_base& tx, int64_t id,
                         const std::string& notify_channel,
                         const std::string& cancel_channel) {
  cancel_report report;
  auto rows = tx.exec_params(sql::admin_job_state, id);
  if (rows.empty())
    return report;
  if (waits(rows[0]["state"].as<std::string>())) {
    // Wait for (and hold off) the claims of its lane, then for a claim
    // of its row; each statement after that sees what they committed
    // (READ COMMITTED). A claim locks a lane before any row of it, so
    // this order cannot deadlock with them.
    if (rows[0]["on_lane"].as<bool>(false))
      tx.exec_params(sql::admin_job_lock_lane,
                     rows[0]["queue"].as<std::string>(),
                     rows[0]["priority"].as<int>());
    tx.exec_params(sql::admin_job_lock_row, id);
    auto cancelled = tx.exec_params(sql::admin_job_cancel, id, notify_channel);
    if (!cancelled.empty()) {
      tx.exec_params0(sql::admin_job_cancel_request_delete, id);
      report.result = cancel_result::cancelled;
      report.position.state = "cancelled";
      return report;
    }
  }
  // Claimed meanwhile, or running, or finished.
  auto now = read_state(tx, id);
  if (!now)
    return report;
  report.position = *now;
  if (now->state == "completed" || now->state == "cancelled") {
    report.result = cancel_result::finished;
    return report;
  }
  tx.exec_params(sql::admin_job_cancel_request, id, cancel_channel);
  report.result = cancel_result::requested;
  return report;
}

retry_report retry_job(pqxx::connection_base& conn, int64_t id,
                       const std::string& notify_channel) {
  pqxx::work tx(conn);
  auto report = retry_job(tx, id, notify_channel);
  if (report.result == retry_result::run_now
      || report.result == retry_result::rerun)
    tx.commit();
  return report;
}

retry_report retry_job(pqxx::transaction_base& tx, int64_t id,
                       const std::string& notify_channel) {
  retry_report report;
  auto found = read_state(tx, id);
  if (!found)
    return report;
  report.position = *found;
  const auto& state = found->state;
  pqxx::result changed;
  tx.exec_params(sql::admin_job_lock_row, id);
  if (state == "scheduled" || state == "available") {
    changed = tx.exec_params(sql::admin_job_run_now, id, notify_channel);
    report.result = retry_result::run_now;
  } else if (state == "completed" || state == "cancelled") {
    changed = tx.exec_params(sql::admin_job_rerun, id, notify_channel);
    report.result = retry_result::rerun;
  }
  if (changed.empty()) {
    // Running or waiting for a callback (or it moved on meanwhile).
    if (auto now = read_state(tx, id))
      report.position = *now;
    report.result = retry_result::refused;
    return report;
  }
  tx.exec_params0(sql::admin_job_cancel_request_delete, id);
  return report;
}

} // namespace aw::storage
