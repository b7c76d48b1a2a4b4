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
  const char* table;
  std::vector<const char*> columns;
};
const std::vector<required_table>& required_schema();

/// Every SQL function the runtime's queries call.
const std::vector<const char*>& required_functions();

/// Returns one line per missing table, column or function ("table jobs is
/// missing column metadata"); empty when the schema is complete.
std::vector<std::string> missing_schema(pqxx::connection_base& conn);

/// The user-facing message for a non-empty missing_schema() result.
std::string describe_missing_schema(const std::vector<std::string>& missing);

} // namespace aw::storage
