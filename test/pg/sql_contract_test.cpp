// The plain-SQL contract (docs/sql.md) as any language uses it, from psql
// and from libpqxx: INSERT, INSERT ... ON CONFLICT DO NOTHING against the
// unique key, and COPY (psql's \copy and pqxx::stream_to) all enqueue jobs
// that a worker claims; jobs_live shows any job's live state by id.

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;

namespace {

aw::storage::job_store make_store(const aw::test::fresh_database& db) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  opts.completed_retention = 1h;
  return aw::storage::job_store{opts};
}

/// Runs psql on `db` with `script` on stdin; returns its exit status.
int psql(const aw::test::fresh_database& db, const std::string& script) {
  auto path = std::string{"/tmp/aw_sql_contract_"} + db.name + ".sql";
  {
    std::ofstream out(path);
    out << script;
  }
  auto cmd = "psql -qX -v ON_ERROR_STOP=1 '" + db.url + "' -f '" + path
             + "' >/dev/null";
  auto rc = std::system(cmd.c_str());
  std::remove(path.c_str());
  return rc;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sql_contract_test)

BOOST_AUTO_TEST_CASE(insert_on_conflict_and_copy_from_psql_enqueue_jobs_that_run) {
  aw::test::fresh_database db;
  auto rc = psql(db, R"(
BEGIN;
INSERT INTO jobs_in (kind, args) VALUES ('send_email', '{"to": "ada@example.com"}');
INSERT INTO jobs_in (kind, queue, args, priority) VALUES ('report', 'reports', '{"day": 1}', -5);
INSERT INTO jobs_in (kind, args, unique_key, unique_states)
VALUES ('sync', '{}', 'sync:1', '{available,scheduled,running}')
ON CONFLICT DO NOTHING;
INSERT INTO jobs_in (kind, args, unique_key, unique_states)
VALUES ('sync', '{}', 'sync:1', '{available,scheduled,running}')
ON CONFLICT DO NOTHING;
COMMIT;
\copy jobs_in (kind, queue, args) FROM STDIN
copied	default	{"n": 1}
copied	default	{"n": 2}
copied	reports	{"n": 3}
\.
)");
  BOOST_REQUIRE_EQUAL(rc, 0);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == 6);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'sync'") == 1);
  auto store = make_store(db);
  auto def = store.claim("default", 100).jobs;
  auto rep = store.claim("reports", 100).jobs;
  std::multiset<std::string> kinds;
  for (auto& j : def)
    kinds.insert(j.kind);
  BOOST_TEST(kinds == (std::multiset<std::string>{"copied", "copied",
                                                  "send_email", "sync"}),
             boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(rep.size(), 2u);
  BOOST_TEST(rep[0].kind == "report"); // priority -5 first
  // Each job's live state is one SELECT by id away.
  for (auto& j : def)
    BOOST_TEST(s.text("SELECT state FROM jobs_live WHERE id = "
                      + std::to_string(j.id)) == "running");
  // Once the unique job finished, its key is free again.
  for (auto& j : def)
    if (j.kind == "sync")
      store.finish({aw::test::outcome(j, aw::outcome_kind::completed)});
  BOOST_REQUIRE_EQUAL(psql(db, "INSERT INTO jobs_in (kind, unique_key, unique_states) "
                               "VALUES ('sync', 'sync:1', "
                               "'{available,scheduled,running}') "
                               "ON CONFLICT DO NOTHING;"),
                      0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'sync'") == 2);
}

BOOST_AUTO_TEST_CASE(copy_through_libpqxx_stream_to_enqueues_jobs_that_run) {
  aw::test::fresh_database db;
  {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    pqxx::stream_to copy(tx, "jobs_in",
                         std::vector<std::string>{"kind", "queue", "args",
                                                  "priority"});
    for (int i = 0; i < 1000; ++i)
      copy << std::make_tuple(std::string{"noop"}, std::string{"default"},
                              "{\"i\": " + std::to_string(i) + "}", i % 2);
    copy.complete();
    tx.commit();
  }
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM actor_worker_claim_order('default')") == 2);
  auto store = make_store(db);
  size_t claimed = 0;
  int last_priority = -1;
  for (;;) {
    auto part = store.claim("default", 300).jobs;
    if (part.empty())
      break;
    for (auto& j : part) {
      BOOST_TEST(j.priority >= last_priority); // priority 0 first, then 1
      last_priority = j.priority;
    }
    claimed += part.size();
  }
  BOOST_TEST(claimed == 1000u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'") == 1000);
}

BOOST_AUTO_TEST_CASE(a_bad_row_is_refused_with_the_constraint_that_says_why) {
  aw::test::fresh_database db;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  try {
    tx.exec("INSERT INTO jobs_in (kind, args) VALUES ('x', '[1, 2]')");
    BOOST_FAIL("a non-object args was accepted");
  } catch (const pqxx::check_violation& e) {
    BOOST_TEST(std::string{e.what()}.find("jobs_args_object") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
