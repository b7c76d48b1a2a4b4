#include "actor_worker/storage/db_error.hpp"

#include <regex>

#include <pqxx/except>

namespace aw::storage {

namespace {

/// libpq's words for a connection that no retry will fix (connection
/// failures carry no SQLSTATE in libpqxx 6, only libpq's message).
bool refused_for_good(const std::string& message) {
  static const char* const phrases[] = {
    "password authentication failed",
    "no password supplied",
    "authentication failed for user",
    "does not exist", // database "x" / role "x" does not exist
    "invalid connection string",
    "invalid URI",
    "missing \"=\" after",
    "end of string reached when looking for matching",
    "unexpected spaces found",
    "invalid integer value",
    "invalid port number",
    "invalid sslmode value",
    "unrecognized URI query parameter",
    "invalid connection option",
    "invalid percent-encoded token",
    "forbidden value %00 in percent-encoded value",
  };
  for (auto* p : phrases)
    if (message.find(p) != std::string::npos)
      return true;
  return false;
}

} // namespace

ec classify(const std::exception& e) {
  if (auto broken = dynamic_cast<const pqxx::broken_connection*>(&e))
    return refused_for_good(broken->what()) ? ec::database_misconfigured
                                            : ec::database_unavailable;
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e))
    return ec::database_unavailable;
  if (auto sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const auto& state = sql->sqlstate();
    // Class 08: connection exception. 57P01-57P03: the server is shutting
    // down or starting up. 53300: too many connections. 40001/40P01: a
    // serialization failure or deadlock; retrying is the remedy. 25006: a
    // write (or LISTEN) on a read-only server: a standby, reached by a
    // multi-host URL without target_session_attrs=read-write, or a primary
    // made read-only for a while (default_transaction_read_only); the
    // session is dropped and the next one looks for a primary again.
    if (state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02"
        || state == "57P03" || state == "53300" || state == "40001"
        || state == "40P01" || state == "25006")
      return ec::database_unavailable;
  }
  return ec::database_error;
}

std::string redact_secrets(std::string text) {
  // scheme://user:PASSWORD@ (the password ends at the last '@' before the
  // host part, as libpq reads it) and password=VALUE (quoted or not).
  static const std::regex url_password{R"(([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s"']*:)[^\s"']*@)"};
  static const std::regex keyword_password{R"((password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s"']+))",
                                           std::regex::icase};
  // A malformed %XX escape: libpq quotes the URL's part that holds it
  // alone (the password, as likely as not), with nothing to tell which.
  static const std::regex percent_token{
    R"re((invalid percent-encoded token: |forbidden value %00 in percent-encoded value: )"[^"\n]*"?)re"};
  text = std::regex_replace(text, url_password, "$1***@");
  text = std::regex_replace(text, percent_token, "$1\"***\" (a %XX escape in the URL is malformed)");
  return std::regex_replace(text, keyword_password, "$1***");
}

std::string one_line(const std::exception& e) {
  std::string text = redact_secrets(e.what());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  // libpq indents its hints with a tab after the line break: one space.
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == '\r') {
      if (out.empty() || out.back() != ' ')
        out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

caf::error to_error(const std::exception& e, const std::string& what_failed) {
  return make_error(classify(e), what_failed + ": " + one_line(e));
}

} // namespace aw::storage
