// aw::storage::migrate against a real database: first run, re-run,
// concurrent runs, a schema newer than the binary, the schema before 0.1
// (refused, saying what to do), and the SQL functions it installs.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/migrations.hpp"
#include "actor_worker/storage/schema_check.hpp"

using aw::test::contains;

namespace {

int64_t migration_count() {
  return static_cast<int64_t>(aw::storage::embedded_migrations().size());
}

} // namespace

BOOST_AUTO_TEST_SUITE(migrate_test)

BOOST_AUTO_TEST_CASE(first_run_applies_every_migration_in_order) {
  aw::test::fresh_database db{false};
  BOOST_TEST(aw::storage::current_schema_version(db.url) == 0);
  auto report = aw::storage::migrate(db.url);
  BOOST_TEST(report.from_version == 0);
  BOOST_TEST(report.to_version == aw::storage::latest_migration_version());
  std::vector<std::string> names;
  for (auto& m : aw::storage::embedded_migrations())
    names.push_back(m.name);
  BOOST_TEST(report.applied == names);
  BOOST_TEST(aw::storage::current_schema_version(db.url)
             == aw::storage::latest_migration_version());
  BOOST_TEST(db.scalar("SELECT count(*) FROM actor_worker_migrations")
             == migration_count());
  // The tables exist.
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 0);
  BOOST_TEST(db.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(every_function_file_is_installed_and_the_hot_ones_plan_once) {
  aw::test::fresh_database db;
  for (const auto& f : aw::storage::embedded_functions()) {
    BOOST_TEST(f.defines.front() == f.name);  // a file is named for its first
    for (const auto& name : f.defines) {
      auto sql = std::string{"SELECT count(*) FROM pg_proc WHERE proname = '"}
                 + name + "' AND pronamespace = current_schema()::regnamespace";
      BOOST_TEST(db.scalar(sql) == 1, name);
    }
  }
  // The claim's file holds the whole claim (docs/storage.md).
  auto claim = std::find_if(aw::storage::embedded_functions().begin(),
                            aw::storage::embedded_functions().end(),
                            [](const auto& f) { return f.name == "actor_worker_claim"; });
  BOOST_TEST_REQUIRE((claim != aw::storage::embedded_functions().end()));
  BOOST_TEST(claim->defines.size() == 9u);
  // A generic plan and no JIT for the functions of the claim and outcome
  // paths: re-planning per call cost them 0.3 ms each. The settings are
  // part of each function's file, so every install keeps them.
  for (const char* name :
       {"actor_worker_claim", "actor_worker_complete", "actor_worker_materialize",
        "actor_worker_release", "actor_worker_rescue", "actor_worker_recycle",
        "actor_worker_jobs_inserted"}) {
    auto sql = std::string{"SELECT count(*) FROM pg_proc WHERE proname = '"}
               + name + "' AND pronamespace = current_schema()::regnamespace";
    BOOST_TEST(db.scalar(sql + " AND NOT coalesce(proconfig, '{}') @> "
                               "ARRAY['plan_cache_mode=force_generic_plan', "
                               "'jit=off']")
                 == 0,
               name);
  }
}

BOOST_AUTO_TEST_CASE(a_database_of_the_schema_before_0_1_is_refused_with_what_to_do) {
  // What migrations 001_initial to 022_pack_retention left: their records
  // and a `jobs` view over job_rows, with a job in it.
  aw::test::fresh_database db{false};
  db.exec("CREATE TABLE actor_worker_migrations (version integer PRIMARY KEY, "
          "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  db.exec("INSERT INTO actor_worker_migrations (version, name) VALUES "
          "(1, '001_initial'), (2, '002_leases'), (22, '022_pack_retention')");
  db.exec("CREATE TABLE job_rows (id bigint, kind text)");
  db.exec("INSERT INTO job_rows VALUES (1, 'noop')");
  db.exec("CREATE VIEW jobs AS SELECT * FROM job_rows");
  BOOST_CHECK_EXCEPTION(aw::storage::migrate(db.url),
                        aw::storage::schema_error,
                        [&](const aw::storage::schema_error& e) {
                          BOOST_TEST_MESSAGE("message: " << e.what());
                          return contains(e.what(), "before 0.1")
                                 && contains(e.what(), "001_initial")
                                 && contains(e.what(), "drain")
                                 && contains(e.what(), "new database");
                        });
  // Nothing was touched.
  BOOST_TEST(db.scalar("SELECT count(*) FROM actor_worker_migrations") == 3);
  BOOST_TEST(db.scalar("SELECT count(*) FROM job_rows") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM pg_proc WHERE proname = "
                       "'actor_worker_claim'") == 0);
  // Through the CLI: exit 3 (the database's state), the same words.
  auto r = aw::test::run_binary("migrate", db.url);
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(contains(r.err, "before 0.1"), r.err);
}

BOOST_AUTO_TEST_CASE(the_schema_check_knows_every_column_of_its_tables) {
  // A column the queries use but the check does not name fails as an SQL
  // error in the middle of a claim, not as schema_outdated at start: every
  // column the migrations give a table the check knows is one it checks.
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::read_transaction tx(*conn);
  for (const auto& t : aw::storage::required_schema()) {
    auto columns = tx.exec_params("SELECT column_name FROM information_schema.columns "
                                  "WHERE table_schema = current_schema() "
                                  "AND table_name = $1",
                                  t.table);
    BOOST_TEST_CONTEXT("table " << t.table) {
      BOOST_TEST(!columns.empty());
      for (const auto& row : columns) {
        auto name = row[0].as<std::string>();
        bool checked = std::any_of(t.columns.begin(), t.columns.end(),
                                   [&](const char* c) { return name == c; });
        BOOST_TEST(checked, "column " << name << " is not in required_schema()");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(each_missing_dead_letter_column_is_named) {
  // The dead letter queue is written only when a job runs out of
  // attempts, long after start: the check is what says up front that a
  // column of it is missing, each by name.
  aw::test::fresh_database db;
  auto conn = db.connect();
  for (const auto& t : aw::storage::required_schema()) {
    if (std::string{t.table} != "dead_letter_jobs")
      continue;
    BOOST_TEST(t.columns.size() >= 16u);
    for (const char* column : t.columns) {
      db.exec(std::string{"ALTER TABLE dead_letter_jobs RENAME COLUMN "} + column
              + " TO gone_column");
      auto missing = aw::storage::missing_schema(*conn);
      db.exec(std::string{"ALTER TABLE dead_letter_jobs RENAME COLUMN gone_column TO "}
              + column);
      auto text = aw::storage::describe_missing_schema(missing);
      BOOST_TEST(contains(text, std::string{"table dead_letter_jobs is missing column "}
                                  + column),
                 text);
    }
  }
  BOOST_TEST(aw::storage::missing_schema(*conn).empty());
}

BOOST_AUTO_TEST_CASE(rerun_is_a_no_op) {
  aw::test::fresh_database db; // migrated once already
  db.exec("INSERT INTO jobs_in (kind) VALUES ('noop')");
  auto before = db.scalar("SELECT count(*) FROM actor_worker_migrations");
  auto report = aw::storage::migrate(db.url);
  BOOST_TEST(report.applied.empty());
  BOOST_TEST(report.from_version == aw::storage::latest_migration_version());
  BOOST_TEST(report.to_version == report.from_version);
  BOOST_TEST(db.scalar("SELECT count(*) FROM actor_worker_migrations") == before);
  // Data survives.
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs") == 1);
}

BOOST_AUTO_TEST_CASE(concurrent_migrations_both_succeed_and_record_each_version_once) {
  aw::test::fresh_database db{false};
  std::atomic<int> ready{0};
  aw::storage::migrate_report reports[2];
  std::string errors[2];
  auto run = [&](int i) {
    ++ready;
    while (ready.load() < 2)
      std::this_thread::yield();
    try {
      reports[i] = aw::storage::migrate(db.url);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  };
  std::thread a{run, 0};
  std::thread b{run, 1};
  a.join();
  b.join();
  BOOST_TEST(errors[0] == "");
  BOOST_TEST(errors[1] == "");
  // One applied everything, the other found nothing left to do.
  auto applied = reports[0].applied.size() + reports[1].applied.size();
  BOOST_TEST(applied == static_cast<size_t>(migration_count()));
  BOOST_TEST((reports[0].applied.empty() || reports[1].applied.empty()));
  for (auto& r : reports)
    BOOST_TEST(r.to_version == aw::storage::latest_migration_version());
  BOOST_TEST(db.scalar("SELECT count(*) FROM actor_worker_migrations")
             == migration_count());
  BOOST_TEST(db.scalar("SELECT count(*) FROM (SELECT version FROM "
                       "actor_worker_migrations GROUP BY version "
                       "HAVING count(*) > 1) AS dup")
             == 0);
}

BOOST_AUTO_TEST_CASE(database_newer_than_the_binary_is_refused) {
  aw::test::fresh_database db;
  auto newer = aw::storage::latest_migration_version() + 1;
  db.exec("INSERT INTO actor_worker_migrations (version, name) VALUES ("
          + std::to_string(newer) + ", 'from_the_future')");
  BOOST_CHECK_EXCEPTION(aw::storage::migrate(db.url),
                        aw::storage::schema_error,
                        [&](const aw::storage::schema_error& e) {
                          BOOST_TEST_MESSAGE("message: " << e.what());
                          return contains(e.what(), "newer")
                                 && contains(e.what(), std::to_string(newer));
                        });
  // Nothing was touched.
  BOOST_TEST(aw::storage::current_schema_version(db.url) == newer);
  BOOST_TEST(db.scalar("SELECT count(*) FROM actor_worker_migrations")
             == migration_count() + 1);
}

BOOST_AUTO_TEST_SUITE_END()
