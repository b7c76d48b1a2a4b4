// aw::storage::job_store against a real database: claim order and limits,
// what is never claimed, concurrent claims, finish, release and retention
// cleanup.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;
using aw::storage::job_store;
using aw::test::ids_of;

namespace {

job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id,
                     std::chrono::milliseconds retention = 1h) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.completed_retention = retention;
  return job_store{opts};
}

/// Enqueues `n` due jobs in `queue` and returns their ids.
std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db, int n,
                               const std::string& queue = "default") {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests) {
    r.kind = "noop";
    r.options.queue = queue;
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

std::string row_where(int64_t id) {
  return " FROM jobs_live WHERE id = " + std::to_string(id);
}

} // namespace

BOOST_AUTO_TEST_SUITE(claim_test)

BOOST_AUTO_TEST_CASE(claim_order_is_priority_then_run_at_then_id) {
  aw::test::fresh_database db;
  // One statement, so every now() below is the same instant and equal
  // run_at values really are equal.
  db.exec("INSERT INTO jobs_in (id, kind, priority, run_at) VALUES "
          "(101, 'noop',  0, now() - interval '10 seconds'),"
          "(102, 'noop', -5, now() - interval '1 second'),"
          "(103, 'noop',  0, now() - interval '20 seconds'),"
          "(104, 'noop',  0, now() - interval '20 seconds'),"
          "(105, 'noop', 10, now() - interval '60 seconds'),"
          "(106, 'noop', -5, now() - interval '1 second')");
  auto store = make_store(db, "w1");
  // In one claim, returned in claim order: by priority, and on a lane in
  // the order they were enqueued (one statement: by id), whatever run_at
  // they were given.
  auto all = store.claim("default", 10).jobs;
  BOOST_TEST(ids_of(all) == (std::vector<int64_t>{102, 106, 101, 103, 104, 105}));
  BOOST_TEST(all.front().priority == -5);
  BOOST_TEST(store.release(all, false) == 6);
  // Released, they wait off the lanes, where they are claimed by priority,
  // then run_at, then id; one at a time, the selection itself follows that
  // order.
  const std::vector<int64_t> expected{102, 106, 103, 104, 101, 105};
  std::vector<int64_t> one_by_one;
  for (int i = 0; i < 6; ++i) {
    auto got = store.claim("default", 1).jobs;
    BOOST_REQUIRE_EQUAL(got.size(), 1u);
    one_by_one.push_back(got.front().id);
  }
  BOOST_TEST(one_by_one == expected);
  BOOST_TEST(store.claim("default", 1).jobs.empty());
}

BOOST_AUTO_TEST_CASE(claim_never_returns_more_than_the_limit) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 7);
  auto store = make_store(db, "w1");
  std::vector<size_t> sizes;
  std::set<int64_t> claimed;
  for (int i = 0; i < 4; ++i) {
    auto got = store.claim("default", 3).jobs;
    sizes.push_back(got.size());
    for (auto& j : got) {
      BOOST_TEST(claimed.insert(j.id).second);
      BOOST_TEST(j.attempt == 1);
      BOOST_TEST(j.kind == "noop");
    }
  }
  BOOST_TEST(sizes == (std::vector<size_t>{3, 3, 1, 0}));
  BOOST_TEST(claimed == std::set<int64_t>(ids.begin(), ids.end()));
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' "
                       "AND locked_by = 'w1' AND locked_at IS NOT NULL "
                       "AND attempt = 1")
             == 7);
}

BOOST_AUTO_TEST_CASE(scheduled_jobs_are_not_claimed_until_due) {
  aw::test::fresh_database db;
  int64_t id;
  {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    aw::insert_options opts;
    opts.delay = 1h;
    id = aw::enqueue(tx, "noop", {}, opts);
    tx.commit();
  }
  auto store = make_store(db, "w1");
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT state" + row_where(id)) == "scheduled");
  BOOST_TEST(s.scalar("SELECT attempt" + row_where(id)) == 0);
  // Once its run_at passes, a scheduled job (e.g. a retry) is claimable.
  s.exec("UPDATE jobs_in SET run_at = now() - interval '1 second'");
  BOOST_TEST(ids_of(store.claim("default", 10).jobs) == std::vector<int64_t>{id});
}

BOOST_AUTO_TEST_CASE(jobs_of_other_queues_are_not_claimed) {
  aw::test::fresh_database db;
  auto other = enqueue_n(db, 2, "other");
  auto store = make_store(db, "w1");
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'") == 2);
  auto got = store.claim("other", 10).jobs;
  BOOST_TEST(ids_of(got) == other);
  for (auto& j : got)
    BOOST_TEST(j.queue == "other");
}

BOOST_AUTO_TEST_CASE(concurrent_claims_of_two_workers_never_share_a_job) {
  aw::test::fresh_database db;
  const int n = 2000;
  auto ids = enqueue_n(db, n);
  auto a = make_store(db, "worker-a");
  auto b = make_store(db, "worker-b");
  a.connect();
  b.connect();
  std::atomic<int> ready{0};
  auto run = [&](job_store& store, std::vector<int64_t>& out,
                 std::string& error) {
    try {
      ++ready;
      while (ready.load() < 2)
        std::this_thread::yield();
      for (;;) {
        auto got = store.claim("default", 7).jobs;
        if (got.empty())
          return;
        for (auto& j : got)
          out.push_back(j.id);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  std::vector<int64_t> got_a, got_b;
  std::string err_a, err_b;
  std::thread ta{run, std::ref(a), std::ref(got_a), std::ref(err_a)};
  std::thread tb{run, std::ref(b), std::ref(got_b), std::ref(err_b)};
  ta.join();
  tb.join();
  BOOST_REQUIRE_MESSAGE(err_a.empty() && err_b.empty(), err_a << err_b);
  BOOST_TEST_MESSAGE("worker-a claimed " << got_a.size() << ", worker-b "
                                         << got_b.size());
  std::set<int64_t> set_a(got_a.begin(), got_a.end());
  std::set<int64_t> set_b(got_b.begin(), got_b.end());
  BOOST_TEST(set_a.size() == got_a.size()); // no job twice to one worker
  BOOST_TEST(set_b.size() == got_b.size());
  std::vector<int64_t> both;
  std::set_intersection(set_a.begin(), set_a.end(), set_b.begin(), set_b.end(),
                        std::back_inserter(both));
  BOOST_TEST(both.empty());
  BOOST_TEST(got_a.size() + got_b.size() == static_cast<size_t>(n));
  // The database agrees: each row claimed once, by the worker that got it.
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' "
                      "AND attempt = 1")
             == n);
  std::map<int64_t, std::string> owner;
  for (const auto& row : s.query("SELECT id, locked_by FROM jobs_live"))
    owner[row[0].as<int64_t>()] = row[1].as<std::string>();
  size_t mismatches = 0;
  for (auto id : set_a)
    mismatches += owner[id] != "worker-a";
  for (auto id : set_b)
    mismatches += owner[id] != "worker-b";
  BOOST_TEST(mismatches == 0u);
}

BOOST_AUTO_TEST_CASE(finish_completed_marks_the_row_completed) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 1);
  auto store = make_store(db, "w1", 1h);
  auto claimed = store.claim("default", 1).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  auto results = aw::test::results(store.finish(
    {aw::test::outcome(claimed, ids[0], aw::outcome_kind::completed)}));
  BOOST_TEST((results == std::vector<aw::finish_result>{aw::finish_result::applied}));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT state" + row_where(ids[0])) == "completed");
  BOOST_TEST(s.check("SELECT finalized_at IS NOT NULL" + row_where(ids[0])));
  BOOST_TEST(s.scalar("SELECT error_count" + row_where(ids[0])) == 0);
}

BOOST_AUTO_TEST_CASE(finish_completed_with_zero_retention_deletes_the_row) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1", 0ms);
  auto claimed = store.claim("default", 2).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
  auto results = aw::test::results(store.finish(
    {aw::test::outcome(claimed, ids[0], aw::outcome_kind::completed),
     aw::test::outcome(claimed, ids[1], aw::outcome_kind::completed)}));
  BOOST_TEST((results
              == std::vector<aw::finish_result>{aw::finish_result::applied,
                                                aw::finish_result::applied}));
  // The two completed rows are gone; the unclaimed one is untouched.
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 1);
  BOOST_TEST(s.scalar("SELECT id FROM jobs_live") == ids[2]);
  BOOST_TEST(s.text("SELECT state FROM jobs_live") == "available");
}

BOOST_AUTO_TEST_CASE(finish_applies_a_mixed_batch_and_answers_in_order) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1", 1h);
  auto claimed = store.claim("default", 3).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  auto results = aw::test::results(store.finish(
    {aw::test::outcome(claimed, ids[2], aw::outcome_kind::terminal_failure, "bad"),
     aw::test::outcome(claimed, ids[0], aw::outcome_kind::completed),
     aw::test::outcome(claimed, ids[1], aw::outcome_kind::retryable_failure,
                       "try again")}));
  BOOST_TEST(results.size() == 3u);
  for (auto r : results)
    BOOST_TEST((r == aw::finish_result::applied));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT state" + row_where(ids[0])) == "completed");
  BOOST_TEST(s.text("SELECT state" + row_where(ids[1])) == "scheduled");
  BOOST_TEST(s.scalar("SELECT count(*)" + row_where(ids[2])) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE "
                      "original_job_id = "
                      + std::to_string(ids[2]))
             == 1);
}

BOOST_AUTO_TEST_CASE(stale_outcome_of_a_released_job_changes_nothing) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1", 1h);
  auto claimed = store.claim("default", 3).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  BOOST_TEST(store.release(claimed) == 3);
  auto results = aw::test::results(store.finish(
    {aw::test::outcome(claimed, ids[0], aw::outcome_kind::completed),
     aw::test::outcome(claimed, ids[1], aw::outcome_kind::retryable_failure, "late"),
     aw::test::outcome(claimed, ids[2], aw::outcome_kind::terminal_failure, "late")}));
  for (auto r : results)
    BOOST_TEST((r == aw::finish_result::stale));
  aw::test::db_session s{db.url};
  // Released after their handlers started: available again, the attempt
  // counted as started, nothing charged.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                      "AND error_count = 0 AND last_error_message IS NULL "
                      "AND finalized_at IS NULL AND locked_by IS NULL "
                      "AND attempt = 1")
             == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(outcome_from_a_worker_that_does_not_hold_the_job_is_stale) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 1);
  auto owner = make_store(db, "owner", 1h);
  auto intruder = make_store(db, "intruder", 1h);
  auto claimed = owner.claim("default", 1).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
  BOOST_TEST((aw::test::results(intruder.finish(
                {aw::test::outcome(claimed, ids[0], aw::outcome_kind::completed)}))
              == std::vector<aw::finish_result>{aw::finish_result::stale}));
  BOOST_TEST(intruder.release(claimed) == 0);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT state" + row_where(ids[0])) == "running");
  BOOST_TEST(s.text("SELECT locked_by" + row_where(ids[0])) == "owner");
  // The owner's outcome still applies.
  BOOST_TEST((aw::test::results(owner.finish(
                {aw::test::outcome(claimed, ids[0], aw::outcome_kind::completed)}))
              == std::vector<aw::finish_result>{aw::finish_result::applied}));
}

BOOST_AUTO_TEST_CASE(release_returns_running_jobs_to_available_without_charge) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 4);
  // One job already failed twice before this run.
  db.exec("UPDATE jobs_in SET error_count = 2 WHERE id = " + std::to_string(ids[1]));
  auto store = make_store(db, "w1");
  auto claimed = store.claim("default", 3).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  BOOST_TEST(store.release(claimed, false) == 3);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                      "AND locked_by IS NULL AND locked_at IS NULL")
             == 4);
  BOOST_TEST(s.scalar("SELECT error_count" + row_where(ids[0])) == 0);
  BOOST_TEST(s.scalar("SELECT error_count" + row_where(ids[1])) == 2);
  BOOST_TEST(s.scalar("SELECT error_count" + row_where(ids[2])) == 0);
  // Released jobs can be claimed again at once.
  BOOST_TEST(store.claim("default", 10).jobs.size() == 4u);
  BOOST_TEST(store.release(std::vector<aw::held_job>{}) == 0);
}

BOOST_AUTO_TEST_CASE(delete_expired_deletes_only_finished_rows_past_the_retention) {
  aw::test::fresh_database db;
  // Unique jobs (jobs_unique, outside the ring): retention deletes them
  // row by row (the ring's slots go whole).
  db.exec("INSERT INTO jobs_in (id, kind, state, finalized_at, created_at, unique_key, ready_xid) VALUES "
          "(1, 'noop', 'completed', now() - interval '2 hours', now() - interval '3 hours', 'k1', '0'),"
          "(2, 'noop', 'completed', now() - interval '30 minutes', now() - interval '3 hours', 'k2', '0'),"
          "(3, 'noop', 'cancelled', now() - interval '2 hours', now() - interval '3 hours', 'k3', '0'),"
          "(4, 'noop', 'available', NULL, now() - interval '3 hours', 'k4', '0'),"
          "(5, 'noop', 'scheduled', NULL, now() - interval '3 hours', 'k5', '0')");
  db.exec("INSERT INTO jobs_in (id, kind, state, batch_id, created_at, unique_key, ready_xid) "
          "VALUES (6, 'noop', 'running', 2, now() - interval '3 hours', 'k6', '0')");
  auto store = make_store(db, "w1", 1h);
  BOOST_TEST(store.delete_expired(100) == 2);
  aw::test::db_session s{db.url};
  std::vector<int64_t> left;
  for (const auto& row : s.query("SELECT id FROM jobs_live ORDER BY id"))
    left.push_back(row[0].as<int64_t>());
  BOOST_TEST(left == (std::vector<int64_t>{2, 4, 5, 6}));
  BOOST_TEST(store.delete_expired(100) == 0);
}

BOOST_AUTO_TEST_CASE(delete_expired_deletes_at_most_one_batch_oldest_first) {
  aw::test::fresh_database db;
  db.exec("INSERT INTO jobs_in (id, kind, state, finalized_at, unique_key, ready_xid) "
          "SELECT i, 'noop', 'completed', now() - (i || ' hours')::interval, 'k' || i, '0' "
          "FROM generate_series(2, 6) AS i");
  auto store = make_store(db, "w1", 1h);
  BOOST_TEST(store.delete_expired(2) == 2);
  // The two oldest (finalized 6 and 5 hours ago) went first.
  BOOST_TEST(db.scalar("SELECT max(id) FROM jobs_live") == 4);
  BOOST_TEST(store.delete_expired(10) == 3);
  BOOST_TEST(db.scalar("SELECT count(*) FROM jobs_live") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
