#pragma once
// Sorting database exceptions into "transient, retry with backoff" and
// "a real error": the loops treat the first kind as a hiccup, never fatal.

#include <exception>
#include <string>

#include "actor_worker/messages/error.hpp"

namespace aw::storage {

/// ec::database_misconfigured for a connection the server or libpq refuses
/// for good (malformed URL, wrong password, unknown role or database);
/// ec::database_unavailable for a lost or refused connection, a server
/// shutting down, a commit whose outcome is unknown or a write refused by
/// a read-only server (a standby: the primary is elsewhere, or not yet
/// promoted); ec::database_error for anything else.
ec classify(const std::exception& e);

/// `text` with the passwords of connection strings masked: the password of
/// a URL (`scheme://user:***@host`) and a `password=***` keyword. libpq
/// quotes a malformed URL whole in its error message.
std::string redact_secrets(std::string text);

/// The exception's message on one line, without libpq's trailing newline,
/// secrets redacted (redact_secrets).
std::string one_line(const std::exception& e);

/// classify() and one_line() as a CAF error, prefixed with `what_failed`.
caf::error to_error(const std::exception& e, const std::string& what_failed);

} // namespace aw::storage
