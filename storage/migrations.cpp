#include "actor_worker/storage/migrations.hpp"

#include <pqxx/pqxx>

namespace aw::storage {

namespace {

/// Serializes concurrent `migrate` runs cluster-wide ("awmigrat" in ASCII).
constexpr int64_t migrate_lock_key = 0x61776d6967726174;

constexpr const char* create_version_table_sql = R"sql(
CREATE TABLE IF NOT EXISTS actor_worker_migrations (
  version    integer PRIMARY KEY,
  name       text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)
)sql";

int recorded_version(pqxx::transaction_base& tx) {
  auto exists = tx.exec1("SELECT to_regclass('actor_worker_migrations') IS NOT NULL");
  if (!exists[0].as<bool>())
    return 0;
  auto row = tx.exec1("SELECT coalesce(max(version), 0) FROM actor_worker_migrations");
  return row[0].as<int>();
}

} // namespace

int latest_migration_version() {
  const auto& all = embedded_migrations();
  return all.empty() ? 0 : all.back().version;
}

migrate_report migrate(const std::string& url) {
  pqxx::connection conn(url);
  pqxx::work tx(conn, "aw_migrate");
  tx.exec_params("SELECT pg_advisory_xact_lock($1)", migrate_lock_key);
  tx.exec0(create_version_table_sql);
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
    tx.exec_params("INSERT INTO actor_worker_migrations (version, name) "
                   "VALUES ($1, $2)",
                   m.version, m.name);
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
