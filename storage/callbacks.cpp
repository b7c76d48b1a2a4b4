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
  pqxx::result rows;
  job_event e;
  auto payload_text = payload.is_null() ? std::optional<std::string>{}
                                        : std::optional<std::string>{payload.dump()};
  switch (action) {
    case callback_action::complete:
      rows = sub.exec_params(sql::callback_complete, callback_id, payload_text);
      e.type = event_type::completed;
      break;
    case callback_action::retry:
    case callback_action::resume:
      rows = sub.exec_params(sql::callback_retry, callback_id, payload_text,
                             defaults::notify_channel);
      e.type = event_type::retried;
      break;
    case callback_action::fail:
      e.message = error_message.empty() ? "failed by its external callback"
                                        : error_message;
      rows = sub.exec_params(sql::callback_fail, callback_id, e.message);
      e.type = event_type::exhausted;
      break;
  }
  if (rows.empty()) {
    auto job = sub.exec_params(sql::callback_job, callback_id);
    sub.commit();
    if (job.empty())
      throw callback_error(ec::callback_not_found,
                           "no job has callback id " + callback_id);
    throw callback_error(ec::callback_not_waiting,
                         "callback " + callback_id + " belongs to job "
                           + job[0]["id"].as<std::string>()
                           + ", which is no longer waiting for it (state "
                           + job[0]["state"].as<std::string>()
                           + "): it was already resolved or timed out");
  }
  sub.commit();
  callback_resolution out;
  out.action = action;
  out.row_json = rows[0]["row_json"].as<std::string>();
  out.has_event = action != callback_action::resume;
  e.job_json = out.row_json;
  auto row = nlohmann::json::parse(e.job_json);
  e.kind = row.value("kind", std::string{});
  // A callback retry charges nothing: its event is about the attempt that
  // waited, not a failed one.
  if (action == callback_action::retry)
    e.attempt = row.value("error_count", 0) + 1;
  out.event = std::move(e);
  return out;
}

} // namespace aw::storage
