#pragma once
// The schema migrations runner. Migrations are the files migrations/NNN_*.sql,
// compiled into the binary (see cmake/EmbedMigrations.cmake) and recorded in
// the table actor_worker_migrations.

#include <stdexcept>
#include <string>
#include <vector>

namespace aw::storage {

/// One migration file.
struct migration {
  int version;
  std::string name;
  std::string sql;
};

/// All migrations this binary carries, in version order.
const std::vector<migration>& embedded_migrations();

/// The highest version this binary knows.
int latest_migration_version();

/// What a migrate run did.
struct migrate_report {
  int from_version = 0;
  int to_version = 0;
  std::vector<std::string> applied;
};

/// A schema the binary cannot work with (newer than it knows).
struct schema_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Applies every missing migration in one transaction under an advisory
/// lock, so concurrent runs converge and a re-run is a no-op. Throws
/// schema_error when the database is newer than this binary.
migrate_report migrate(const std::string& url);

/// The version recorded in the database, 0 when never migrated.
int current_schema_version(const std::string& url);

} // namespace aw::storage
