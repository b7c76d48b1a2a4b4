#pragma once
// The schema migrations runner. Migrations are the files migrations/NNN_*.sql
// (DDL only), recorded in the table actor_worker_migrations; every SQL
// function is in a file storage/sql/functions/NAME.sql (NAME and the
// helpers only it calls), installed by each migrate run. Both are compiled
// into the binary (cmake/EmbedMigrations.cmake).

#include <stdexcept>
#include <string>
#include <vector>

namespace aw::storage {

/// One migration file.
struct migration {
  /// Its number (NNN of NNN_name.sql).
  int version;
  /// Its name (the file name without the number).
  std::string name;
  /// Its SQL.
  std::string sql;
};

/// All migrations this binary carries, in version order.
const std::vector<migration>& embedded_migrations();

/// One SQL function file, storage/sql/functions/NAME.sql: the function
/// NAME, followed by the helpers only it calls (the claim's file holds the
/// whole claim, so that it reads in one place).
struct sql_function {
  /// The file's name and its main function's.
  std::string name;
  /// Every function it defines (CREATE OR REPLACE FUNCTION), `name` first.
  std::vector<std::string> defines;
  /// The file's SQL.
  std::string sql;
};

/// Every SQL function file this binary carries, by name.
const std::vector<sql_function>& embedded_functions();

/// The highest version this binary knows.
int latest_migration_version();

/// What a migrate run did.
struct migrate_report {
  /// The schema's version before.
  int from_version = 0;
  /// The schema's version after.
  int to_version = 0;
  /// The migrations applied, in order (empty when it was up to date).
  std::vector<std::string> applied;
};

/// A schema the binary cannot work with: newer than it knows, or the
/// schema of actor-worker before 0.1, which it does not upgrade.
struct schema_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// In one transaction under an advisory lock (concurrent runs converge, a
/// re-run changes nothing): installs every SQL function (CREATE OR
/// REPLACE), then applies every missing migration. Throws schema_error
/// when the database is newer than this binary, or holds the schema of
/// actor-worker before 0.1 (migrations 001_initial to 022_pack_retention),
/// which it does not upgrade: the message says what to do.
migrate_report migrate(const std::string& url);

/// The version recorded in the database, 0 when never migrated.
int current_schema_version(const std::string& url);

} // namespace aw::storage
