// `jobs` tells the truth (docs/sql.md): whatever path a job took (claimed
// off its lane or as a row, completed, retried, snoozed, cancelled, parked
// and resolved, rescued, dead-lettered, released), the view says what the
// worker recorded: its state, attempt, holder, error and finalization.
// Every job of jobs_in shows exactly once. Writes go to jobs_in; `jobs`
// refuses them, naming jobs_in; a unique key without unique states holds
// its key in the default states.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;
using aw::outcome_kind;
using aw::storage::job_store;
using aw::test::contains;
using aw::test::outcome;

namespace {

job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.completed_retention = 1h;
  opts.reclaim_window = 120s;
  return job_store{opts};
}

/// `n` plain jobs of `kind` (on their lane), by the enqueue API.
std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db, int n,
                               const std::string& kind) {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests)
    r.kind = kind;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

/// What `jobs` says of job `id`: "state attempt error_count locked_by
/// finalized?" ("-" for NULL).
std::string seen(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT state || ' ' || attempt || ' ' || error_count || ' ' "
                "|| coalesce(locked_by, '-') || ' ' "
                "|| CASE WHEN finalized_at IS NULL THEN '-' ELSE 'final' END "
                "FROM jobs WHERE id = " + std::to_string(id));
}

/// What `jobs` says of job `id` (as seen()), with its state replaced by
/// "waiting" when it is the one its run_at gives: 'scheduled' until then,
/// 'available' after (a backoff of two seconds may pass while a test
/// runs, so both are read in one statement).
std::string seen_waiting(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT CASE WHEN j.state = CASE WHEN j.run_at > now() "
                "THEN 'scheduled' ELSE 'available' END THEN 'waiting' "
                "ELSE j.state END || ' ' || attempt || ' ' || error_count || ' ' "
                "|| coalesce(locked_by, '-') || ' ' "
                "|| CASE WHEN finalized_at IS NULL THEN '-' ELSE 'final' END "
                "FROM jobs AS j WHERE id = " + std::to_string(id));
}

/// Every job of jobs_in shows in `jobs` exactly once, and nothing else
/// does; and the read of all of them agrees with the read of each by id.
void every_job_once(aw::test::db_session& s) {
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs")
             == s.scalar("SELECT count(*) FROM jobs_in"));
  BOOST_TEST(s.scalar("SELECT count(DISTINCT id) FROM jobs")
             == s.scalar("SELECT count(*) FROM jobs_in"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in AS i WHERE NOT EXISTS "
                      "(SELECT 1 FROM jobs AS j WHERE j.id = i.id)") == 0);
  // What a scan says of each job is what a read of it by id says.
  BOOST_TEST(s.text("SELECT coalesce(string_agg(a.id || ': ' || a.state || ' ' "
                    "|| a.attempt || ' / ' || b.state || ' ' || b.attempt, '; '), '') "
                    "FROM jobs AS a, LATERAL (SELECT * FROM jobs AS x WHERE x.id = a.id "
                    "OFFSET 0) AS b "
                    "WHERE (a.state, a.attempt, a.locked_by, a.finalized_at) "
                    "IS DISTINCT FROM (b.state, b.attempt, b.locked_by, b.finalized_at)")
             == "");
}

/// Makes worker `w` dead an hour ago, after all its claims.
void kill_worker(aw::test::db_session& s, const std::string& w) {
  s.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
         "last_seen_at) VALUES ('" + w + "', 'n', 'h', 1, 'v', "
         "now() - interval '1 hour') ON CONFLICT (worker_id) DO UPDATE "
         "SET last_seen_at = now() - interval '1 hour'");
  s.exec("UPDATE job_batches SET claimed_at = now() - interval '61 minutes' "
         "WHERE worker = '" + w + "'");
}

} // namespace

BOOST_AUTO_TEST_SUITE(truthful_jobs_test)

BOOST_AUTO_TEST_CASE(every_path_a_job_takes_reads_true_in_jobs) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Ten lane jobs, and two that go off the lanes as they are inserted (a
  // keyed one, and one due later).
  auto lane = enqueue_n(db, 10, "k");
  s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('k', 'key')");
  auto keyed = s.scalar("SELECT max(id) FROM jobs_in");
  s.exec("INSERT INTO jobs_in (kind, run_at) VALUES ('k', now() + interval '1 hour')");
  auto later = s.scalar("SELECT max(id) FROM jobs_in");
  for (auto id : lane)
    BOOST_TEST(seen(s, id) == "available 0 0 - -");
  BOOST_TEST(seen(s, keyed) == "available 0 0 - -");
  BOOST_TEST(seen(s, later) == "scheduled 0 0 - -");
  every_job_once(s);

  // A claim: the row job and the lane jobs, running, held by w1 since the
  // claim, at the attempt the claim handed the worker.
  auto w1 = make_store(db, "w1");
  auto claimed = w1.claim("default", 100).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 11u);
  for (auto& j : claimed) {
    BOOST_TEST(seen(s, j.id) == "running " + std::to_string(j.attempt) + " 0 w1 -");
    BOOST_TEST(s.check("SELECT locked_at = (SELECT claimed_at FROM job_batches "
                       "WHERE id = " + std::to_string(j.lease)
                       + ") FROM jobs WHERE id = " + std::to_string(j.id)));
  }
  every_job_once(s);

  // Outcomes, as the worker reports them.
  auto retried = outcome(claimed, lane[1], outcome_kind::retryable_failure, "boom");
  auto snoozed = outcome(claimed, lane[2], outcome_kind::snoozed);
  snoozed.delay_ms = 3600000;
  auto parked = outcome(claimed, lane[4], outcome_kind::waiting_callback);
  parked.delay_ms = 3600000;
  auto reports = w1.finish({outcome(claimed, lane[0], outcome_kind::completed),
                            retried, snoozed,
                            outcome(claimed, lane[3], outcome_kind::cancelled, "no"),
                            parked,
                            outcome(claimed, lane[5], outcome_kind::terminal_failure, "bad"),
                            outcome(claimed, keyed, outcome_kind::completed)});
  for (auto& r : reports)
    BOOST_TEST((r.result == aw::finish_result::applied));
  BOOST_TEST(seen(s, lane[0]) == "completed 1 0 w1 final");
  BOOST_TEST(seen(s, keyed) == "completed 1 0 w1 final");
  // Failed: due again after its backoff, the failure counted and said.
  BOOST_TEST(seen_waiting(s, lane[1]) == "waiting 1 1 - -");
  BOOST_TEST(s.text("SELECT last_error_message FROM jobs WHERE id = "
                    + std::to_string(lane[1])) == "boom");
  BOOST_TEST(s.check("SELECT last_failed_at IS NOT NULL FROM jobs WHERE id = "
                     + std::to_string(lane[1])));
  // Snoozed: due later, no failure counted (the attempt it started stays).
  BOOST_TEST(seen(s, lane[2]) == "scheduled 1 0 - -");
  BOOST_TEST(seen(s, lane[3]) == "cancelled 1 0 w1 final");
  BOOST_TEST(s.text("SELECT state FROM jobs WHERE id = " + std::to_string(lane[4]))
             == "waiting_external");
  // Dead-lettered: gone from jobs, in the dead letter queue.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE id = " + std::to_string(lane[5])) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE original_job_id = "
                      + std::to_string(lane[5])) == 1);
  every_job_once(s);

  // The parked job's callback completes it.
  auto callback = s.text("SELECT callback_id::text FROM jobs WHERE id = "
                         + std::to_string(lane[4]));
  {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    aw::storage::resolve_callback(tx, callback, aw::storage::callback_action::complete,
                                  nlohmann::json{{"ok", true}}, "");
    tx.commit();
  }
  BOOST_TEST(contains(seen(s, lane[4]), "completed 1 0 "));
  BOOST_TEST(contains(seen(s, lane[4]), " final"));
  BOOST_TEST(s.text("SELECT callback_result::text FROM jobs WHERE id = "
                    + std::to_string(lane[4])) == R"({"ok": true})");

  // Release at shutdown: an unstarted job goes back due, uncharged, held by
  // nobody.
  int64_t lease6 = 0;
  for (auto& j : claimed)
    if (j.id == lane[6])
      lease6 = j.lease;
  BOOST_TEST(w1.release(std::vector<aw::held_job>{{lane[6], lease6 + 2, 0}}, false)
             == 0); // not its lease
  BOOST_TEST(w1.release(std::vector<aw::held_job>{{lane[6], lease6, 0}}, false) == 1);
  BOOST_TEST(seen(s, lane[6]) == "available 0 0 - -");
  every_job_once(s);

  // Rescue: w1 dies holding lanes 7 to 9, of which 7 and 8 started. They
  // are charged and rescheduled; 9 goes back due, uncharged.
  std::vector<aw::held_job> started;
  for (auto& j : claimed)
    if (j.id == lane[7] || j.id == lane[8])
      started.push_back({j.id, j.lease, 0});
  w1.record_starts(started);
  kill_worker(s, "w1");
  auto rescuer = make_store(db, "w2");
  auto rescued = rescuer.rescue(100);
  BOOST_TEST(rescued.size() == 2u);
  BOOST_TEST(seen_waiting(s, lane[7]) == "waiting 1 1 - -");
  BOOST_TEST(seen_waiting(s, lane[8]) == "waiting 1 1 - -");
  BOOST_TEST(contains(s.text("SELECT last_error_message FROM jobs WHERE id = "
                             + std::to_string(lane[7])), "lease expired"));
  BOOST_TEST(seen(s, lane[9]) == "available 0 0 - -");
  every_job_once(s);

  // The jobs given back run again as rows, held by their new claim.
  s.exec("UPDATE jobs_in SET run_at = now() WHERE id IN (" + std::to_string(lane[1])
         + ", " + std::to_string(lane[2]) + ", " + std::to_string(lane[7]) + ", "
         + std::to_string(lane[8]) + ")");
  auto again = rescuer.claim("default", 100).jobs;
  BOOST_TEST(again.size() == 6u); // 1, 2, 6, 7, 8, 9
  for (auto& j : again)
    BOOST_TEST(contains(seen(s, j.id), "running " + std::to_string(j.attempt) + " "));
  std::vector<aw::job_outcome> done;
  for (auto& j : again)
    done.push_back(outcome(j, outcome_kind::completed));
  rescuer.finish(done);
  for (auto& j : again)
    BOOST_TEST(contains(seen(s, j.id), "completed " + std::to_string(j.attempt) + " "));
  every_job_once(s);
}

BOOST_AUTO_TEST_CASE(a_lane_batch_partly_done_reads_job_by_job) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Two hundred jobs in a few buckets of 64 ids; half of them complete, in
  // two commits, the rest still run; a transaction that inserted jobs
  // commits late (its jobs not handed out yet, whatever their ids).
  auto ids = enqueue_n(db, 200, "k");
  auto w = make_store(db, "w1");
  auto claimed = w.claim("default", 200).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 200u);
  std::vector<aw::job_outcome> first, second;
  for (size_t i = 0; i < claimed.size(); ++i)
    if (i % 2 == 0)
      (i % 4 == 0 ? first : second).push_back(outcome(claimed[i], outcome_kind::completed));
  w.finish(first);
  w.finish(second);
  // A completion sent again (its commit in doubt) changes nothing.
  w.finish({first.front()}, true);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 100);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'") == 100);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed' "
                      "AND finalized_at IS NOT NULL AND locked_by = 'w1'") == 100);
  for (size_t i = 0; i < claimed.size(); ++i)
    BOOST_TEST(seen(s, claimed[i].id)
               == (i % 2 == 0 ? "completed 1 0 w1 final" : "running 1 0 w1 -"));
  every_job_once(s);

  // A late commit: its jobs wait, though a later transaction's went first.
  pqxx::connection late{db.url};
  pqxx::work late_tx{late};
  late_tx.exec("INSERT INTO jobs_in (kind) SELECT 'late' FROM generate_series(1, 3)");
  enqueue_n(db, 2, "early");
  BOOST_TEST(w.claim("default", 100).jobs.size() == 2u);
  late_tx.commit();
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'late' "
                      "AND state = 'available'") == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'early' "
                      "AND state = 'running'") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'available' "
                      "AND queue = 'default'") == 3);
  every_job_once(s);
  BOOST_TEST(w.claim("default", 100).jobs.size() == 3u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'late' "
                      "AND state = 'running'") == 3);
  every_job_once(s);
}

BOOST_AUTO_TEST_CASE(writes_to_jobs_are_refused_naming_jobs_in) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO jobs_in (kind) VALUES ('k')");
  for (std::string sql : {
         "INSERT INTO jobs (kind) VALUES ('k')",
         "INSERT INTO jobs (kind, unique_key) VALUES ('k', 'u') ON CONFLICT DO NOTHING",
         "UPDATE jobs SET priority = 1",
         "DELETE FROM jobs"}) {
    try {
      s.exec(sql);
      BOOST_FAIL("accepted: " + sql);
    } catch (const pqxx::sql_error& e) {
      BOOST_TEST(contains(e.what(), "read-only view"), sql << ": " << e.what());
      // An insert is told where to write; a change, how to make it.
      BOOST_TEST(contains(e.what(), sql.rfind("INSERT", 0) == 0 ? "jobs_in" : "actor-worker jobs"),
                 sql << ": " << e.what());
    }
  }
  // COPY says the same, from any driver (libpqxx's stream_to here).
  try {
    pqxx::connection c{db.url};
    pqxx::work tx{c};
    pqxx::stream_to copy(tx, "jobs", std::vector<std::string>{"kind"});
    copy << std::make_tuple(std::string{"k"});
    copy.complete();
    tx.commit();
    BOOST_FAIL("COPY into jobs was accepted");
  } catch (const pqxx::sql_error& e) {
    BOOST_TEST(contains(e.what(), "jobs_in"), e.what());
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == 1);
}

BOOST_AUTO_TEST_CASE(a_unique_key_without_states_is_unique_in_the_default_states) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  for (int i = 0; i < 3; ++i)
    s.exec("INSERT INTO jobs_in (kind, args, unique_key) VALUES "
           "('noop', '{}', 'order-42') ON CONFLICT DO NOTHING");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE unique_key = 'order-42'") == 1);
  // Without ON CONFLICT, a duplicate is refused by the unique index.
  BOOST_CHECK_THROW(s.exec("INSERT INTO jobs_in (kind, unique_key) VALUES ('noop', 'order-42')"),
                    pqxx::unique_violation);
  // Once it completed (a default state), it still holds its key; once it
  // is cancelled it no longer does.
  s.exec("UPDATE jobs_in SET state = 'completed', finalized_at = now() "
         "WHERE unique_key = 'order-42'");
  s.exec("INSERT INTO jobs_in (kind, unique_key) VALUES ('noop', 'order-42') "
         "ON CONFLICT DO NOTHING");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE unique_key = 'order-42'") == 1);
  s.exec("UPDATE jobs_in SET state = 'cancelled' WHERE unique_key = 'order-42'");
  s.exec("INSERT INTO jobs_in (kind, unique_key) VALUES ('noop', 'order-42') "
         "ON CONFLICT DO NOTHING");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE unique_key = 'order-42'") == 2);
  // Explicit states still rule: none at all is not unique.
  for (int i = 0; i < 2; ++i)
    s.exec("INSERT INTO jobs_in (kind, unique_key, unique_states) VALUES "
           "('noop', 'free', '{}') ON CONFLICT DO NOTHING");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE unique_key = 'free'") == 2);
}

BOOST_AUTO_TEST_SUITE_END()
