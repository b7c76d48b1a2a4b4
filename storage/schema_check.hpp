#pragma once
// The schema check the worker runs before it polls: an out-of-date schema
// must fail loudly at start, not make every claim fail silently later.

#include <string>
#include <vector>

namespace pqxx {
class connection_base;
}

namespace aw::storage {

/// Every table and column the runtime's queries use.
struct required_table {
  /// The table's name.
  const char* table;
  /// The columns the queries use.
  std::vector<const char*> columns;
};
const std::vector<required_table>& required_schema();

/// A SQL function the runtime's queries call, with the number of
/// parameters the current one has (a migration that adds one replaces the
/// function: the old one left alone means that migration is missing).
struct required_function {
  /// The function's name.
  const char* name;
  /// How many parameters the current version has.
  int parameters;
};
const std::vector<required_function>& required_functions();

/// Returns one line per missing table, column or function ("table jobs is
/// missing column metadata"); empty when the schema is complete.
std::vector<std::string> missing_schema(pqxx::connection_base& conn);

/// The user-facing message for a non-empty missing_schema() result.
std::string describe_missing_schema(const std::vector<std::string>& missing);

} // namespace aw::storage
