#pragma once
// Planted mutations of the real SQL (issue 48, part 4), for the SQL
// schedules only: AW_SIM_MUTATION=NAME makes the suite re-create one SQL
// function in its throwaway database from the function's own file text
// (as migrate installs it) with one textual replacement. Production SQL
// is never changed. A replacement whose original text is no longer in the
// file fails loudly: a change of that SQL must update its mutation here.

#include <string>
#include <vector>

namespace pqxx {
class connection_base;
}

namespace aw::sim::sql {

/// One mutation: in the file of storage/sql/functions/ that defines
/// function `function`, every `original` becomes `mutated`, and the file is
/// run again.
struct mutation {
  /// The name AW_SIM_MUTATION selects.
  std::string name;
  /// The SQL function it patches.
  std::string function;
  /// A snippet of the file's text (must be there).
  std::string original;
  /// What replaces it.
  std::string mutated;
  /// The invariant the schedules must find violated (checks.hpp).
  std::string caught_as;
};

/// Every mutation that lives in SQL.
const std::vector<mutation>& sql_mutations();

/// The mutation called `name`; throws when there is none.
const mutation& find_mutation(const std::string& name);

/// Re-creates the mutated function in the database of `conn`; returns the
/// file it patched (storage/sql/functions/NAME.sql). Throws when the
/// original snippet is not in the function's text.
std::string apply_mutation(pqxx::connection_base& conn, const mutation& m);

} // namespace aw::sim::sql
