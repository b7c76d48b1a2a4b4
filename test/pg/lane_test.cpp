// The lanes of migrations/004_fast_lane.sql against a real database: what
// the `jobs` view shows for jobs claimed in batches, the commit-order fence
// (a late commit is never skipped; a long-open transaction does not hold a
// lane up), run identity (an outcome of an earlier run never finalizes a
// later one, even in the same process), releases, rescues of expired
// batches, claims bounded in bytes, routing of plain INSERTs and UPDATEs
// through the view, retention of lane rows enqueued before 019 (row by
// row), and statements on one batch staying within its range when batches
// share an enqueue transaction (018). Lane partitions (019) are
// lane_partition_test's.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
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
using aw::outcome_kind;
using aw::test::ids_of;
using aw::storage::job_store;
using aw::test::contains;
using aw::test::outcome;

namespace {

// fence_wait: long by default. The suites share one server and the fence is
// cluster-wide: with the runtime's 200 ms, a busy moment in another suite
// could send a job down the row-per-state path and change what a test
// sees. The test of a transaction left open sets it short itself.
job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id,
                     std::chrono::milliseconds retention = 1h,
                     std::chrono::milliseconds fence_wait = 30s) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.completed_retention = retention;
  opts.reclaim_window = 120s;
  opts.fence_wait = fence_wait;
  return job_store{opts};
}

std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db, int n,
                               const std::string& kind = "noop") {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests)
    r.kind = kind;
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

// Lane jobs as they were before migrations/019: in job_rows_main, where
// retention deletes them row by row (an upgraded database's backlog, and
// what 004-018's retention tests are about). The rows keep their lane keys.
std::vector<int64_t> enqueue_legacy(const aw::test::fresh_database& db, int n) {
  auto ids = enqueue_n(db, n);
  aw::test::db_session s{db.url};
  s.exec("UPDATE job_rows SET lane_gen = NULL WHERE lane_gen IS NOT NULL");
  return ids;
}

std::string where(int64_t id) {
  return " FROM jobs WHERE id = " + std::to_string(id);
}

} // namespace

BOOST_AUTO_TEST_SUITE(lane_test)

BOOST_AUTO_TEST_CASE(plain_due_jobs_are_claimed_in_batches_writing_no_job_row) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 5);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows WHERE ready_xid IS NOT NULL")
             == 5);
  auto before = s.text("SELECT string_agg(xmin::text, ',' ORDER BY id) FROM job_rows");
  auto store = make_store(db, "w1");
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 5u);
  for (auto& j : claimed) {
    BOOST_TEST(j.batch_id > 0);
    BOOST_TEST(j.batch_id == claimed.front().batch_id);
    BOOST_TEST(j.attempt == 1);
  }
  BOOST_TEST(ids_of(claimed) == ids);
  // The claim wrote one batch row and no job row...
  BOOST_TEST(s.text("SELECT string_agg(xmin::text, ',' ORDER BY id) FROM job_rows")
             == before);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 1);
  // ...and the view shows them running under this worker, first attempt.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running' "
                      "AND locked_by = 'w1' AND locked_at IS NOT NULL "
                      "AND attempt = 1")
             == 5);
  // Completions: one receipt row for the batch, still no job row written.
  std::vector<aw::job_outcome> outcomes;
  for (auto id : {ids[0], ids[1], ids[2]})
    outcomes.push_back(outcome(claimed, id, outcome_kind::completed));
  for (auto r : aw::test::results(store.finish(outcomes)))
    BOOST_TEST((r == aw::finish_result::applied));
  BOOST_TEST(s.text("SELECT string_agg(xmin::text, ',' ORDER BY id) FROM job_rows")
             == before);
  BOOST_TEST(s.scalar("SELECT count(*) FROM batch_completions") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed' "
                      "AND finalized_at IS NOT NULL AND attempt = 1")
             == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'") == 2);
  BOOST_TEST(s.check("SELECT closed_at IS NULL FROM claim_batches"));
  // The last two: the batch closes.
  store.finish({outcome(claimed, ids[3], outcome_kind::completed),
                outcome(claimed, ids[4], outcome_kind::completed)});
  BOOST_TEST(s.check("SELECT closed_at IS NOT NULL AND remaining = 0 "
                     "FROM claim_batches"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 5);
}

BOOST_AUTO_TEST_CASE(a_failing_lane_job_becomes_an_ordinary_row) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1");
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  auto results = aw::test::results(store.finish(
    {outcome(claimed, ids[0], outcome_kind::retryable_failure, "boom"),
     outcome(claimed, ids[1], outcome_kind::terminal_failure, "bad"),
     outcome(claimed, ids[2], outcome_kind::completed)}));
  for (auto r : results)
    BOOST_TEST((r == aw::finish_result::applied));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT state" + where(ids[0])) == "scheduled");
  BOOST_TEST(s.scalar("SELECT attempt" + where(ids[0])) == 1);
  BOOST_TEST(s.scalar("SELECT error_count" + where(ids[0])) == 1);
  BOOST_TEST(s.text("SELECT last_error_message" + where(ids[0])) == "boom");
  BOOST_TEST(s.check("SELECT ready_xid IS NULL FROM job_rows WHERE id = "
                     + std::to_string(ids[0])));
  BOOST_TEST(s.scalar("SELECT attempt FROM dead_letter_jobs WHERE "
                      "original_job_id = "
                      + std::to_string(ids[1]))
             == 1);
  BOOST_TEST(s.text("SELECT state" + where(ids[2])) == "completed");
  BOOST_TEST(s.check("SELECT closed_at IS NOT NULL FROM claim_batches"));
  // Its retry runs the row-per-state way, as the second attempt.
  s.exec("UPDATE jobs SET run_at = now() WHERE id = " + std::to_string(ids[0]));
  auto again = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].id == ids[0]);
  BOOST_TEST(again[0].batch_id == 0);
  BOOST_TEST(again[0].attempt == 2);
}

BOOST_AUTO_TEST_CASE(an_enqueue_that_commits_late_is_never_skipped) {
  aw::test::fresh_database db;
  // A producer's transaction takes its id, then others commit after it.
  auto slow = db.connect();
  pqxx::work slow_tx{*slow};
  aw::enqueue(slow_tx, "noop", nlohmann::json{{"who", "slow"}});
  auto fast = enqueue_n(db, 3);
  auto store = make_store(db, "w1");
  // The fast jobs sort after the open transaction's: the fence holds them
  // back instead of letting the cursor pass the slow one.
  auto first = store.claim("default", 10);
  BOOST_TEST(first.jobs.empty());
  BOOST_TEST(first.more_soon);
  slow_tx.commit();
  auto all = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_TEST(all.size() == 4u);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'") == 4);
}

BOOST_AUTO_TEST_CASE(a_transaction_left_open_does_not_hold_a_lane_up) {
  aw::test::fresh_database db;
  // Someone else's transaction with an id stays open...
  auto idle = db.connect();
  pqxx::work idle_tx{*idle};
  idle_tx.exec("SELECT pg_current_xact_id()");
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1", 1h, 200ms);
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  // ...longer than fence_wait (200 ms): the waiting jobs move to the
  // row-per-state path and run anyway.
  std::vector<aw::claimed_job> got;
  aw::test::wait_until(
    [&] {
      for (auto& j : store.claim("default", 10).jobs)
        got.push_back(j);
      return got.size() >= 3;
    },
    10s);
  BOOST_TEST(got.size() == 3u);
  std::set<int64_t> claimed;
  for (auto& j : got) {
    claimed.insert(j.id);
    BOOST_TEST(j.batch_id == 0);
  }
  BOOST_TEST(claimed == std::set<int64_t>(ids.begin(), ids.end()));
  idle_tx.abort();
}

BOOST_AUTO_TEST_CASE(an_outcome_of_an_earlier_run_never_finalizes_a_later_one) {
  // Oban #1496 and River #1302: the same process claims a job again after
  // its first run was rescued; the first run's late outcome must not
  // complete the second run.
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 1);
  auto store = make_store(db, "w1");
  auto first = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(first.size(), 1u);
  aw::test::db_session s{db.url};
  // The lease expires (the worker stalled) and the job is rescued.
  s.exec("UPDATE claim_batches SET heartbeat_at = now() - interval '1 hour'");
  auto rescued = store.rescue(100);
  BOOST_REQUIRE_EQUAL(rescued.size(), 1u);
  BOOST_TEST((rescued[0].reason == aw::rescue_reason::stale_heartbeat));
  BOOST_TEST(s.text("SELECT state" + where(ids[0])) == "scheduled");
  BOOST_TEST(s.scalar("SELECT error_count" + where(ids[0])) == 1);
  // Due again, claimed again by the same worker.
  s.exec("UPDATE jobs SET run_at = now() WHERE id = " + std::to_string(ids[0]));
  auto second = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(second.size(), 1u);
  BOOST_TEST(second[0].attempt == 2);
  // The first run's late completion: stale.
  BOOST_TEST((aw::test::results(store.finish(
                {outcome(first, ids[0], outcome_kind::completed)}))
              == std::vector<aw::finish_result>{aw::finish_result::stale}));
  BOOST_TEST(s.text("SELECT state" + where(ids[0])) == "running");
  // The second run's outcome applies.
  BOOST_TEST((aw::test::results(store.finish(
                {outcome(second, ids[0], outcome_kind::completed)}))
              == std::vector<aw::finish_result>{aw::finish_result::applied}));
  BOOST_TEST(s.text("SELECT state" + where(ids[0])) == "completed");
  BOOST_TEST(s.scalar("SELECT attempt" + where(ids[0])) == 2);
}

BOOST_AUTO_TEST_CASE(an_expired_batch_is_rescued_and_its_owner_outcomes_are_stale) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 4);
  auto store = make_store(db, "w1");
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  store.finish({outcome(claimed, ids[0], outcome_kind::completed)});
  aw::test::db_session s{db.url};
  // The owner stops heartbeating; another node's rescue takes the batch.
  s.exec("UPDATE claim_batches SET heartbeat_at = now() - interval '1 hour'");
  auto other = make_store(db, "w2");
  auto rescued = other.rescue(100);
  BOOST_TEST(rescued.size() == 3u);
  for (auto& r : rescued)
    BOOST_TEST(contains(r.message, "stopped heartbeating"));
  BOOST_TEST(s.text("SELECT state" + where(ids[0])) == "completed");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'scheduled' "
                      "AND error_count = 1 AND attempt = 1")
             == 3);
  BOOST_TEST(s.check("SELECT closed_at IS NOT NULL FROM claim_batches"));
  // Heartbeats of the owner no longer hold the batch.
  auto alive = store.heartbeat({}, {claimed[0].batch_id});
  BOOST_TEST(alive.batches.empty());
  // The owner's late outcomes change nothing.
  for (auto r : aw::test::results(
         store.finish({outcome(claimed, ids[1], outcome_kind::completed),
                       outcome(claimed, ids[2], outcome_kind::retryable_failure,
                               "late")})))
    BOOST_TEST((r == aw::finish_result::stale));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'scheduled' "
                      "AND error_count = 1")
             == 3);
}

BOOST_AUTO_TEST_CASE(release_puts_lane_jobs_back_charging_nothing) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 4);
  auto store = make_store(db, "w1");
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  // Two never started (buffered), two started (drain expired).
  BOOST_TEST(store.release({claimed[0], claimed[1]}, false) == 2);
  BOOST_TEST(store.release({claimed[2], claimed[3]}, true) == 2);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'available' "
                      "AND error_count = 0 AND locked_by IS NULL")
             == 4);
  BOOST_TEST(s.scalar("SELECT attempt" + where(ids[0])) == 0);
  BOOST_TEST(s.scalar("SELECT attempt" + where(ids[3])) == 1);
  BOOST_TEST(s.check("SELECT closed_at IS NOT NULL FROM claim_batches"));
  // Back on the lane: the next claim of any worker takes them.
  auto w2 = make_store(db, "w2");
  auto again = aw::test::claim_settled(w2, "default", 10).jobs;
  BOOST_TEST(again.size() == 4u);
  for (auto& j : again)
    BOOST_TEST(j.batch_id > claimed[0].batch_id);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE locked_by = 'w2'") == 4);
}

BOOST_AUTO_TEST_CASE(a_claim_is_bounded_in_bytes_but_takes_at_least_one_job) {
  aw::test::fresh_database db;
  std::vector<aw::enqueue_request> requests(5);
  for (auto& r : requests) {
    r.kind = "noop";
    r.args = {{"blob", std::string(10000, 'x')}};
  }
  {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    aw::enqueue_many(tx, requests);
    tx.commit();
  }
  auto store = make_store(db, "w1");
  auto two = aw::test::claim_settled(store, "default", 10, 25000);
  BOOST_TEST(two.jobs.size() == 2u);
  BOOST_TEST(two.byte_bound);
  auto one = aw::test::claim_settled(store, "default", 10, 100);
  BOOST_TEST(one.jobs.size() == 1u);
  auto rest = aw::test::claim_settled(store, "default", 10, 1 << 20);
  BOOST_TEST(rest.jobs.size() == 2u);
  BOOST_TEST(!rest.byte_bound);
}

BOOST_AUTO_TEST_CASE(plain_inserts_and_updates_through_the_view_route_jobs) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Due, plain: on a lane. Later, explicit state, ordering key, backdated:
  // row-per-state.
  s.exec("INSERT INTO jobs (id, kind) VALUES (1, 'noop')");
  s.exec("INSERT INTO jobs (id, kind, run_at) VALUES (2, 'noop', now() + interval '1 hour')");
  s.exec("INSERT INTO jobs (id, kind, state, run_at) VALUES "
         "(3, 'noop', 'scheduled', now() + interval '1 hour')");
  s.exec("INSERT INTO jobs (id, kind, ordering_key) VALUES (4, 'noop', 'k')");
  s.exec("INSERT INTO jobs (id, kind, run_at) VALUES (5, 'noop', now() - interval '1 minute')");
  BOOST_TEST(s.text("SELECT string_agg(id::text, ',' ORDER BY id) FROM job_rows "
                    "WHERE ready_xid IS NOT NULL")
             == "1");
  // RETURNING works through the view.
  s.exec("SELECT setval('jobs_id_seq', 100)");
  BOOST_TEST(s.scalar("INSERT INTO jobs (kind) VALUES ('noop') RETURNING id") == 101);
  // An UPDATE that makes a lane job unable to run as it is takes it off
  // the lane; one that moves it to another queue gives it a fresh key.
  s.exec("UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = 101");
  BOOST_TEST(s.check("SELECT ready_xid IS NULL FROM job_rows WHERE id = 101"));
  auto key = s.text("SELECT ready_xid::text FROM job_rows WHERE id = 1");
  s.exec("UPDATE jobs SET queue = 'other' WHERE id = 1");
  BOOST_TEST(s.text("SELECT ready_xid::text FROM job_rows WHERE id = 1") != key);
  BOOST_TEST(s.text("SELECT queue" + where(1)) == "other");
  // Everything due is claimed, in priority then run_at order.
  auto store = make_store(db, "w1");
  BOOST_TEST(ids_of(aw::test::claim_settled(store, "default", 10).jobs)
             == (std::vector<int64_t>{5, 4}));
  BOOST_TEST(ids_of(aw::test::claim_settled(store, "other", 10).jobs) == (std::vector<int64_t>{1}));
  // DELETE through the view.
  s.exec("DELETE FROM jobs WHERE id = 3");
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows WHERE id = 3") == 0);
}

BOOST_AUTO_TEST_CASE(priorities_come_first_across_lanes_and_rows) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO jobs (id, kind, priority) VALUES (1, 'noop', 5), (2, 'noop', 0)");
  s.exec("INSERT INTO jobs (id, kind, priority, run_at) VALUES "
         "(3, 'noop', -1, now() - interval '1 second'), "
         "(4, 'noop', 5, now() - interval '1 second')");
  s.exec("INSERT INTO jobs (id, kind, priority) VALUES (5, 'noop', -1)");
  auto store = make_store(db, "w1");
  // One claim must see every lane job, so wait until no transaction open
  // anywhere on the server (another suite's) holds the fence below them.
  BOOST_TEST(aw::test::wait_until(
    [&] {
      return s.check("SELECT pg_snapshot_xmin(pg_current_snapshot()) > "
                     "max(ready_xid) FROM job_rows");
    },
    5s));
  // Priority -1: the row-per-state job, then the lane; then 0; then 5.
  BOOST_TEST(ids_of(store.claim("default", 10).jobs)
             == (std::vector<int64_t>{3, 5, 2, 4, 1}));
}

BOOST_AUTO_TEST_CASE(retention_deletes_closed_batches_and_their_completed_jobs) {
  aw::test::fresh_database db;
  auto ids = enqueue_legacy(db, 3);
  auto store = make_store(db, "w1", 1h);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  std::vector<aw::job_outcome> outcomes;
  for (auto& j : claimed)
    outcomes.push_back(outcome(j, outcome_kind::completed));
  store.finish(outcomes);
  aw::test::db_session s{db.url};
  BOOST_TEST(store.delete_expired(100) == 0); // within the retention
  s.exec("UPDATE claim_batches SET closed_at = now() - interval '2 hours'");
  BOOST_TEST(store.delete_expired(100) == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM batch_completions") == 0);
}

BOOST_AUTO_TEST_CASE(retention_of_many_small_batches_is_bounded_by_jobs_not_batches) {
  // Jobs that trickle in are claimed a few at a time: retention must still
  // delete as many jobs per round as it would from big batches, or it falls
  // behind the completions (a soak at 20,000 jobs/s kept every row).
  aw::test::fresh_database db;
  auto store = make_store(db, "w1", 1h);
  for (int i = 0; i < 60; ++i) {
    enqueue_legacy(db, 1);
    auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
    BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
    store.finish({outcome(claimed[0], outcome_kind::completed)});
  }
  aw::test::db_session s{db.url};
  // Each job is a lane batch of its own, unless another suite's open
  // transaction held the commit-order fence past fence_wait and it was
  // claimed the row-per-state way (its row then keeps its own, fresh
  // finalized_at): count the batches rather than assume 60.
  auto lanes = s.scalar("SELECT count(*) FROM claim_batches");
  BOOST_REQUIRE_GE(lanes, 51);
  s.exec("UPDATE claim_batches SET closed_at = now() - interval '2 hours'");
  // A round deletes about `batch` jobs, whatever the batches' sizes...
  BOOST_TEST(store.delete_expired(50) == 50);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows") == 10);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == lanes - 50);
  // ...and the next one takes the rest.
  BOOST_TEST(store.delete_expired(50) == lanes - 50);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows") == 60 - lanes);
  BOOST_TEST(s.scalar("SELECT count(*) FROM batch_completions") == 0);
}

BOOST_AUTO_TEST_CASE(zero_retention_deletes_lane_jobs_at_completion) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1", 0ms);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  store.finish({outcome(claimed, ids[0], outcome_kind::completed),
                outcome(claimed, ids[1], outcome_kind::completed)});
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows") == 1);
  BOOST_TEST(s.text("SELECT state" + where(ids[2])) == "running");
  BOOST_TEST(s.scalar("SELECT count(*) FROM batch_completions") == 0);
}

BOOST_AUTO_TEST_CASE(outcomes_sent_again_after_a_broken_connection_count_once) {
  // A flush whose connection broke before the answer may have committed;
  // storage sends the same outcomes again marked in doubt. The batch must
  // not count them twice: it would close with a job still unfinished, and
  // that job would look running forever.
  for (auto retention : {std::chrono::milliseconds{1h}, std::chrono::milliseconds{0}}) {
    aw::test::fresh_database db;
    auto ids = enqueue_n(db, 3);
    auto store = make_store(db, "w1", retention);
    auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
    BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
    std::vector<aw::job_outcome> first{
      outcome(claimed, ids[0], outcome_kind::completed),
      outcome(claimed, ids[1], outcome_kind::retryable_failure, "boom")};
    store.finish(first);
    auto again = store.finish(first, true);
    aw::test::db_session s{db.url};
    BOOST_TEST(s.scalar("SELECT remaining FROM claim_batches") == 1);
    BOOST_TEST(s.check("SELECT closed_at IS NULL FROM claim_batches"));
    BOOST_TEST(s.text("SELECT state" + where(ids[2])) == "running");
    BOOST_TEST(s.scalar("SELECT error_count" + where(ids[1])) == 1);
    // The last job's outcome closes the batch.
    store.finish({outcome(claimed, ids[2], outcome_kind::completed)});
    BOOST_TEST(s.check("SELECT closed_at IS NOT NULL FROM claim_batches"));
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
               == (retention.count() == 0 ? 0 : 2));
  }
}

BOOST_AUTO_TEST_CASE(retention_puts_back_an_unfinished_job_of_a_closed_batch) {
  // A safety net: should a batch ever close with a job unfinished,
  // retention must not leave that job behind the lane's cursor.
  aw::test::fresh_database db;
  auto ids = enqueue_legacy(db, 3);
  auto store = make_store(db, "w1", 1h);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  store.finish({outcome(claimed, ids[0], outcome_kind::completed),
                outcome(claimed, ids[1], outcome_kind::completed)});
  aw::test::db_session s{db.url};
  s.exec("UPDATE claim_batches SET closed_at = now() - interval '2 hours', "
         "remaining = 0");
  BOOST_TEST(store.delete_expired(100) == 2);
  BOOST_TEST(s.text("SELECT state" + where(ids[2])) == "available");
  auto back = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_TEST(ids_of(back) == std::vector<int64_t>{ids[2]});
}

BOOST_AUTO_TEST_CASE(two_workers_claiming_one_lane_never_share_a_job) {
  aw::test::fresh_database db;
  const int n = 3000;
  enqueue_n(db, n);
  auto a = make_store(db, "worker-a");
  auto b = make_store(db, "worker-b");
  std::vector<int64_t> got_a, got_b;
  auto run = [](job_store& store, std::vector<int64_t>& out) {
    for (int empty = 0; empty < 3;) {
      auto got = aw::test::claim_settled(store, "default", 97).jobs;
      if (got.empty()) {
        ++empty;
        std::this_thread::sleep_for(5ms);
      }
      for (auto& j : got)
        out.push_back(j.id);
    }
  };
  std::thread ta{run, std::ref(a), std::ref(got_a)};
  std::thread tb{run, std::ref(b), std::ref(got_b)};
  ta.join();
  tb.join();
  std::set<int64_t> all(got_a.begin(), got_a.end());
  all.insert(got_b.begin(), got_b.end());
  BOOST_TEST(all.size() == static_cast<size_t>(n));
  BOOST_TEST(got_a.size() + got_b.size() == static_cast<size_t>(n));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running' "
                      "AND attempt = 1")
             == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE locked_by = 'worker-a'")
             == static_cast<int64_t>(got_a.size()));
}

BOOST_AUTO_TEST_CASE(a_claim_lost_in_a_crash_does_not_lend_its_batch_id_on) {
  // A claim commits asynchronously: a server crash can lose it, its claim
  // cursor and the id sequence's advance with it, while the worker still
  // runs its jobs. Simulated here by undoing exactly what the crash loses.
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 4);
  aw::test::db_session s{db.url};
  auto store = make_store(db, "w1");
  auto sequence = s.query("SELECT last_value, is_called FROM claim_batch_numbers");
  auto cursor = s.query("SELECT last_xid::text, last_id FROM claim_cursors");
  auto old_run = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(old_run.size(), 4u);
  auto lost_batch = old_run.front().batch_id;
  // The crash: the batch row, the cursor's advance and the sequence's.
  s.exec("DELETE FROM claim_batches");
  if (cursor.empty()) // the lane's first claim made its cursor
    s.exec("DELETE FROM claim_cursors");
  for (const auto& row : cursor)
    s.exec("UPDATE claim_cursors SET last_xid = '" + row[0].as<std::string>()
           + "'::xid8, last_id = " + row[1].as<std::string>());
  s.exec("SELECT setval('claim_batch_numbers', "
         + sequence[0][0].as<std::string>() + ", "
         + (sequence[0][1].as<bool>() ? "true" : "false") + ")");
  // The same worker claims the same jobs again: under another batch id
  // (the same sequence number, other random low bits).
  auto new_run = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(new_run.size(), 4u);
  BOOST_TEST(ids_of(new_run) == ids, boost::test_tools::per_element());
  BOOST_TEST(new_run.front().batch_id != lost_batch);
  BOOST_TEST((new_run.front().batch_id >> 20) == (lost_batch >> 20));
  // The old runs' outcomes find no batch of theirs: nothing is written...
  std::vector<aw::job_outcome> stale;
  for (auto id : ids)
    stale.push_back(outcome(old_run, id, outcome_kind::completed));
  for (auto r : aw::test::results(store.finish(stale)))
    BOOST_TEST((r == aw::finish_result::stale));
  BOOST_TEST(s.scalar("SELECT remaining FROM claim_batches") == 4);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'") == 4);
  // ...and the new runs' complete the batch.
  std::vector<aw::job_outcome> fresh;
  for (auto id : ids)
    fresh.push_back(outcome(new_run, id, outcome_kind::completed));
  for (auto r : aw::test::results(store.finish(fresh)))
    BOOST_TEST((r == aw::finish_result::applied));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 4);
  BOOST_TEST(s.check("SELECT closed_at IS NOT NULL AND remaining = 0 "
                     "FROM claim_batches"));
}

BOOST_AUTO_TEST_CASE(statements_on_a_batch_stay_within_its_range) {
  // Batches that begin or end inside one enqueue transaction share its
  // ready_xid with their neighbours: a failure, a release and retention
  // of one batch touch its own first and last jobs and nothing of the
  // next batch (migrations/018_lane_ranges.sql names rows by id and keeps
  // the range as a guard).
  aw::test::fresh_database db;
  auto a = enqueue_legacy(db, 4); // a[0..3]: one transaction
  auto b = enqueue_legacy(db, 4); // the next
  auto c = enqueue_legacy(db, 4); // and the next
  auto store = make_store(db, "w1", 1h);
  auto first = aw::test::claim_settled(store, "default", 6).jobs;
  BOOST_REQUIRE((ids_of(first)
                 == std::vector<int64_t>{a[0], a[1], a[2], a[3], b[0], b[1]}));
  auto second = aw::test::claim_settled(store, "default", 6).jobs;
  BOOST_REQUIRE((ids_of(second)
                 == std::vector<int64_t>{b[2], b[3], c[0], c[1], c[2], c[3]}));
  BOOST_REQUIRE(first[0].batch_id != second[0].batch_id);
  // The first batch: its first and last jobs fail, the rest complete.
  std::vector<aw::job_outcome> outcomes{
    outcome(first, a[0], outcome_kind::retryable_failure, "first"),
    outcome(first, b[1], outcome_kind::retryable_failure, "last")};
  for (auto id : {a[1], a[2], a[3], b[0]})
    outcomes.push_back(outcome(first, id, outcome_kind::completed));
  for (auto r : aw::test::results(store.finish(outcomes)))
    BOOST_TEST((r == aw::finish_result::applied));
  // The second batch: its first job (next to b[1] in one transaction) and
  // its last are released, the rest complete.
  BOOST_TEST(store.release({second[0], second[5]}, false) == 2);
  std::vector<aw::job_outcome> rest;
  for (auto id : {b[3], c[0], c[1], c[2]})
    rest.push_back(outcome(second, id, outcome_kind::completed));
  store.finish(rest);
  aw::test::db_session s{db.url};
  auto state = [&](int64_t id) { return s.text("SELECT state" + where(id)); };
  BOOST_TEST(state(a[0]) == "scheduled");
  BOOST_TEST(state(b[1]) == "scheduled");
  BOOST_TEST(s.text("SELECT last_error_message" + where(b[1])) == "last");
  BOOST_TEST(state(b[2]) == "available");
  BOOST_TEST(state(c[3]) == "available");
  BOOST_TEST(s.scalar("SELECT attempt" + where(b[2])) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 8);
  // Every batch closed: two, or more when the commit-order fence held a
  // transaction back and claim_settled claimed again.
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches "
                      "WHERE closed_at IS NULL") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") >= 2);
  // Retention takes the eight completed jobs and leaves the four others.
  s.exec("UPDATE claim_batches SET closed_at = now() - interval '2 hours'");
  BOOST_TEST(store.delete_expired(100) == 8);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows") == 4);
  BOOST_TEST(state(a[0]) == "scheduled");
  BOOST_TEST(state(b[2]) == "available");
  // The released jobs are claimed again as one batch; when its worker
  // stops heartbeating after completing one, the rescue takes the other.
  auto third = aw::test::claim_settled(store, "default", 6).jobs;
  BOOST_REQUIRE((ids_of(third) == std::vector<int64_t>{b[2], c[3]}));
  store.finish({outcome(third, c[3], outcome_kind::completed)});
  s.exec("UPDATE claim_batches SET heartbeat_at = now() - interval '1 hour' "
         "WHERE closed_at IS NULL");
  auto other = make_store(db, "w2");
  auto rescued = other.rescue(100);
  BOOST_REQUIRE_EQUAL(rescued.size(), 1u);
  BOOST_TEST(rescued[0].id == b[2]);
  BOOST_TEST(state(c[3]) == "completed");
}

BOOST_AUTO_TEST_SUITE_END()
