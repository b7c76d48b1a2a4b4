#include "actor_worker/storage/db_error.hpp"

#include <pqxx/except>

namespace aw::storage {

ec classify(const std::exception& e) {
  if (dynamic_cast<const pqxx::broken_connection*>(&e)
      || dynamic_cast<const pqxx::in_doubt_error*>(&e))
    return ec::database_unavailable;
  if (auto sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const auto& state = sql->sqlstate();
    // Class 08: connection exception. 57P01-57P03: the server is shutting
    // down or starting up. 53300: too many connections. 40001/40P01: a
    // serialization failure or deadlock; retrying is the remedy.
    if (state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02"
        || state == "57P03" || state == "53300" || state == "40001"
        || state == "40P01")
      return ec::database_unavailable;
  }
  return ec::database_error;
}

std::string one_line(const std::exception& e) {
  std::string text = e.what();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  for (auto& c : text)
    if (c == '\n')
      c = ' ';
  return text;
}

caf::error to_error(const std::exception& e, const std::string& what_failed) {
  return make_error(classify(e), what_failed + ": " + one_line(e));
}

} // namespace aw::storage
