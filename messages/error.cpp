#include "actor_worker/messages/error.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace aw {

const char* to_string(ec code) {
  switch (code) {
    case ec::database_unavailable:
      return "database_unavailable";
    case ec::database_error:
      return "database_error";
    case ec::schema_outdated:
      return "schema_outdated";
    case ec::internal:
      return "internal";
    case ec::callback_not_found:
      return "callback_not_found";
    case ec::callback_not_waiting:
      return "callback_not_waiting";
    case ec::follow_up_failed:
      return "follow_up_failed";
    case ec::database_misconfigured:
      return "database_misconfigured";
    case ec::stale_run:
      return "stale_run";
  }
  return "unknown_error";
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
