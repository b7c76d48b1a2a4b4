#include "actor_worker/storage/migrations.hpp"

#include <pqxx/pqxx>

#include "sql_statements.hpp"

namespace aw::storage {

namespace {

/// Serializes concurrent `migrate` runs cluster-wide ("awmigrat" in ASCII).
constexpr int64_t migrate_lock_key = 0x61776d6967726174;

/// The schema version applied so far; 0 before the first migration.
int recorded_version(pqxx::transaction_base& tx) {
  if (!tx.exec1(sql::migration_table_exists)["present"].as<bool>())
    return 0;
  return tx.exec1(sql::migration_version)["version"].as<int>();
}

} // namespace

int latest_migration_version() {
  const auto& all = embedded_migrations();
  return all.empty() ? 0 : all.back().version;
}

migrate_report migrate(const std::string& url) {
  pqxx::connection conn(url);
  pqxx::work tx(conn, "aw_migrate");
  tx.exec_params(sql::migration_lock, migrate_lock_key);
  tx.exec0(sql::create_version_table);
  migrate_report report;
  report.from_version = recorded_version(tx);
  report.to_version = report.from_version;
  auto latest = latest_migration_version();
  if (report.from_version > 0) {
    auto first = tx.exec(sql::migration_first_name);
    if (!first.empty() && first[0][0].as<std::string>() != embedded_migrations().front().name)
      throw schema_error(
        "this database holds the schema of actor-worker before 0.1 (migration "
        + first[0][0].as<std::string>() + " and later, up to version "
        + std::to_string(report.from_version)
        + "), which 0.1 does not upgrade: its storage was redesigned "
          "(docs/storage.md). Let the workers of the old version drain every "
          "job first, then migrate a new database, or a new schema of this "
          "one (add options=-csearch_path%3Dactor_worker to the URL after "
          "CREATE SCHEMA actor_worker), and point the new workers at it");
  }
  if (report.from_version > latest)
    throw schema_error("the database schema is at version "
                       + std::to_string(report.from_version)
                       + ", newer than this actor-worker binary knows (up to "
                       + std::to_string(latest)
                       + "); upgrade the binary instead of migrating");
  // Functions first: the DDL names some (column defaults, an index
  // predicate, triggers, a view). Their bodies are checked when first
  // run, so they may name tables the DDL below creates.
  tx.exec0("SET LOCAL check_function_bodies = off");
  for (const auto& f : embedded_functions()) {
    try {
      tx.exec(f.sql);
    } catch (const pqxx::sql_error& e) {
      throw pqxx::sql_error("installing the functions of storage/sql/functions/"
                              + f.name + ".sql failed: " + e.what(),
                            e.query(), e.sqlstate().c_str());
    }
  }
  for (const auto& m : embedded_migrations()) {
    if (m.version <= report.from_version)
      continue;
    try {
      tx.exec(m.sql);
    } catch (const pqxx::sql_error& e) {
      throw pqxx::sql_error("migration " + m.name + " failed: " + e.what(),
                            e.query(), e.sqlstate().c_str());
    }
    tx.exec_params(sql::migration_record, m.version, m.name);
    report.applied.push_back(m.name);
    report.to_version = m.version;
  }
  tx.commit();
  return report;
}

int current_schema_version(const std::string& url) {
  pqxx::connection conn(url);
  pqxx::read_transaction tx(conn);
  return recorded_version(tx);
}

} // namespace aw::storage
