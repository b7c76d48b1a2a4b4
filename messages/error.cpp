#include "messages/error.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

#include "messages/job.hpp"

namespace aw {

const char* to_string(ec code) {
  switch (code) {
    case ec::none:
      return "none";
    case ec::database_unavailable:
      return "database_unavailable";
    case ec::database_error:
      return "database_error";
    case ec::schema_outdated:
      return "schema_outdated";
    case ec::schema_too_new:
      return "schema_too_new";
    case ec::unknown_kind:
      return "unknown_kind";
    case ec::malformed_args:
      return "malformed_args";
    case ec::invalid_config:
      return "invalid_config";
    case ec::not_found:
      return "not_found";
    case ec::internal:
      return "internal";
    case ec::callback_not_found:
      return "callback_not_found";
    case ec::callback_not_waiting:
      return "callback_not_waiting";
    case ec::follow_up_failed:
      return "follow_up_failed";
  }
  return "unknown_error";
}

const char* to_string(outcome_kind k) {
  switch (k) {
    case outcome_kind::completed:
      return "completed";
    case outcome_kind::retryable_failure:
      return "retryable failure";
    case outcome_kind::terminal_failure:
      return "terminal failure";
    case outcome_kind::deadline_exceeded:
      return "deadline exceeded";
    case outcome_kind::retry_after:
      return "retry after";
    case outcome_kind::snoozed:
      return "snoozed";
    case outcome_kind::cancelled:
      return "cancelled";
    case outcome_kind::waiting_callback:
      return "waiting for callback";
  }
  return "?";
}

const char* to_string(rescue_reason r) {
  switch (r) {
    case rescue_reason::stale_heartbeat:
      return "stale heartbeat";
    case rescue_reason::deadline_exceeded:
      return "deadline exceeded";
    case rescue_reason::expired_callback:
      return "expired callback";
  }
  return "?";
}

const char* to_string(event_type t) {
  switch (t) {
    case event_type::started:
      return "started";
    case event_type::waiting_for_callback:
      return "waiting_for_callback";
    case event_type::completed:
      return "completed";
    case event_type::retried:
      return "retried";
    case event_type::exhausted:
      return "exhausted";
    case event_type::cancelled:
      return "cancelled";
    case event_type::rescued:
      return "rescued";
  }
  return "?";
}

caf::error make_error(ec code, std::string message) {
  return caf::error(static_cast<uint8_t>(code), error_category_atom,
                    caf::make_message(std::move(message)));
}

std::string render(const caf::error& err) {
  if (!err)
    return "no error";
  std::string text;
  if (err.category() == error_category_atom)
    text = to_string(static_cast<ec>(err.code()));
  else
    text = caf::to_string(err);
  const auto& ctx = err.context();
  if (err.category() == error_category_atom && ctx.size() == 1
      && ctx.match_element<std::string>(0))
    text += ": " + ctx.get_as<std::string>(0);
  return text;
}

} // namespace aw
