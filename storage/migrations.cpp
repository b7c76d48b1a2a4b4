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
  if (report.from_version > latest)
    throw schema_error("the database schema is at version "
                       + std::to_string(report.from_version)
                       + ", newer than this actor-worker binary knows (up to "
                       + std::to_string(latest)
                       + "); upgrade the binary instead of migrating");
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
