#include "actor_worker/storage/callbacks.hpp"

#include <cctype>

#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

// The statements are storage/sql/callback_*.sql.

bool is_callback_id(const std::string& s) {
  if (s.size() != 36)
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i])))
      return false;
  }
  return true;
}

callback_action parse_callback_action(const std::string& text) {
  if (text == "complete")
    return callback_action::complete;
  if (text == "fail")
    return callback_action::fail;
  if (text == "retry")
    return callback_action::retry;
  if (text == "resume")
    return callback_action::resume;
  throw std::invalid_argument("unknown callback action '" + text
                              + "' (expected complete, fail, retry or resume)");
}

const char* to_string(callback_action action) {
  switch (action) {
    case callback_action::complete:
      return "complete";
    case callback_action::fail:
      return "fail";
    case callback_action::retry:
      return "retry";
    case callback_action::resume:
      return "resume";
  }
  return "?";
}

namespace {

/// The row and event of an applied resolution, from its statement's row.
callback_resolution resolution_of(callback_action action,
                                  const pqxx::row& row, job_event e) {
  callback_resolution out;
  out.action = action;
  out.row_json = row["row_json"].as<std::string>();
  out.has_event = action != callback_action::resume;
  e.job_json = out.row_json;
  auto job = nlohmann::json::parse(e.job_json);
  e.kind = job.value("kind", std::string{});
  // A callback retry charges nothing: its event is about the attempt that
  // waited, not a failed one.
  if (action == callback_action::retry)
    e.attempt = job.value("error_count", 0) + 1;
  out.event = std::move(e);
  return out;
}

/// Runs `action`'s statement on the job waiting on `callback_id`; no rows
/// when it does not wait.
pqxx::result apply_statement(pqxx::transaction_base& tx,
                             const std::string& callback_id,
                             callback_action action,
                             const nlohmann::json& payload,
                             const std::string& error_message, job_event& e) {
  auto payload_text = payload.is_null() ? std::optional<std::string>{}
                                        : std::optional<std::string>{payload.dump()};
  switch (action) {
    case callback_action::complete:
      e.type = event_type::completed;
      return tx.exec_params(sql::callback_complete, callback_id, payload_text);
    case callback_action::retry:
    case callback_action::resume:
      e.type = event_type::retried;
      return tx.exec_params(sql::callback_retry, callback_id, payload_text,
                            defaults::notify_channel);
    case callback_action::fail:
      e.type = event_type::exhausted;
      e.message = error_message.empty() ? "failed by its external callback"
                                        : error_message;
      return tx.exec_params(sql::callback_fail, callback_id, e.message);
  }
  return {};
}

} // namespace

callback_resolution apply_callback(pqxx::transaction_base& tx,
                                   const std::string& callback_id,
                                   callback_action action,
                                   const nlohmann::json& payload,
                                   const std::string& error_message) {
  job_event e;
  auto rows = apply_statement(tx, callback_id, action, payload, error_message,
                              e);
  if (rows.empty())
    throw callback_error(ec::callback_not_waiting,
                         "callback " + callback_id
                           + ": its job is not waiting for it");
  return resolution_of(action, rows[0], std::move(e));
}

callback_resolution resolve_callback(pqxx::dbtransaction& tx,
                           const std::string& callback_id,
                           callback_action action,
                           const nlohmann::json& payload,
                           const std::string& error_message) {
  if (!is_callback_id(callback_id))
    throw callback_error(ec::callback_not_found,
                         "'" + callback_id
                           + "' is not a callback id (expected a UUID such as "
                             "0b5e5c3e-6f1a-4c1e-9d7e-2a3b4c5d6e7f)");
  // The resolution runs in a savepoint so that a refused one leaves the
  // caller's transaction usable.
  pqxx::subtransaction sub(tx, "aw_callback");
  // The row lock orders this against a park of the same job: a job that
  // registered its id while running is either still running (the
  // resolution is kept for its park) or parked (applied here).
  auto job = sub.exec_params(sql::callback_lock, callback_id);
  if (!job.empty() && job[0]["running"].as<bool>()) {
    if (job[0]["kept"].as<bool>()) {
      sub.commit();
      throw callback_error(ec::callback_not_waiting,
                           "callback " + callback_id + " belongs to job "
                             + job[0]["id"].as<std::string>()
                             + ", which is still running and has a "
                               "resolution kept for when it parks already");
    }
    nlohmann::json kept{{"action", to_string(action)}, {"payload", payload}};
    if (action == callback_action::fail)
      kept["error"] = error_message;
    auto rows = sub.exec_params(sql::callback_keep, callback_id, kept.dump());
    sub.commit();
    callback_resolution out;
    out.action = action;
    out.kept = true;
    out.row_json = rows.empty() ? std::string{"{}"}
                                : rows[0]["row_json"].as<std::string>();
    return out;
  }
  job_event e;
  auto rows = apply_statement(sub, callback_id, action, payload, error_message,
                              e);
  if (rows.empty()) {
    auto found = sub.exec_params(sql::callback_job, callback_id);
    sub.commit();
    if (found.empty())
      throw callback_error(ec::callback_not_found,
                           "no job has callback id " + callback_id);
    throw callback_error(ec::callback_not_waiting,
                         "callback " + callback_id + " belongs to job "
                           + found[0]["id"].as<std::string>()
                           + ", which is no longer waiting for it (state "
                           + found[0]["state"].as<std::string>()
                           + "): it was already resolved or timed out, or "
                             "the run that registered it ended without "
                             "parking");
  }
  sub.commit();
  return resolution_of(action, rows[0], std::move(e));
}

kept_resolution parse_kept_resolution(const std::string& text) {
  kept_resolution out;
  auto doc = nlohmann::json::parse(text);
  if (!doc.is_object() || !doc.contains("action") || !doc["action"].is_string())
    throw std::invalid_argument("a kept callback resolution must be an object "
                                "with a string \"action\", not " + text);
  out.action = parse_callback_action(doc["action"].get<std::string>());
  out.payload = doc.value("payload", nlohmann::json{});
  out.error = doc.value("error", std::string{});
  return out;
}

std::optional<std::string>
register_running_callback(pqxx::transaction_base& tx, const std::string& worker,
                          int64_t job_id, int64_t lease,
                          std::chrono::milliseconds timeout) {
  auto rows = tx.exec_params(sql::callback_register, worker, job_id, lease,
                             static_cast<int64_t>(timeout.count()));
  if (rows.empty())
    return std::nullopt;
  return rows[0]["callback_id"].as<std::string>();
}

} // namespace aw::storage
