// Packed lane jobs (migrations/020_job_packs.sql) against a real database:
// enqueue_many with bulk_layout::packed writes one pack per lane and block
// of jobs, with ids in request order; claims take packed jobs and lane rows
// in one key order, a pack at a time or across packs; a completion is a
// receipt, and everything else (a failure, a release, an expired batch, a
// kind set aside, an admin cancel or retry) first gives the job a row of
// its own; packed_jobs, `jobs show`, `jobs list`, the dashboard, the queue
// counts and the events read packed jobs; retention deletes a pack once its
// jobs are past it, and puts back a job its batch left unfinished; bad
// packed input is refused with the reason.

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/storage/admin_jobs.hpp"
#include "actor_worker/storage/dashboard.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;
using aw::outcome_kind;
using aw::storage::job_store;
using aw::test::ids_of;
using aw::test::outcome;

namespace {

constexpr int64_t first_packed_id = int64_t{1} << 52;

// fence_wait is long for the reason lane_test gives (a transaction of
// another suite may hold the cluster-wide fence).
job_store make_store(const aw::test::fresh_database& db,
                     std::chrono::milliseconds retention = 1h,
                     std::chrono::milliseconds fence_wait = 30s) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "w1";
  opts.completed_retention = retention;
  opts.reclaim_window = 120s;
  opts.fence_wait = fence_wait;
  return job_store{opts};
}

std::vector<aw::enqueue_request> noops(int n, const std::string& queue = "default",
                                       const std::string& kind = "noop") {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto& r = requests[static_cast<size_t>(i)];
    r.kind = kind;
    r.args = nlohmann::json{{"n", i}};
    r.options.queue = queue;
  }
  return requests;
}

std::vector<int64_t> enqueue(const aw::test::fresh_database& db,
                             const std::vector<aw::enqueue_request>& requests,
                             aw::bulk_layout layout = aw::bulk_layout::packed) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests, layout);
  tx.commit();
  return ids;
}

// "" when the job is not there.
std::string packed_state(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT (SELECT state FROM actor_worker_packed_jobs(ARRAY["
                + std::to_string(id) + "::bigint]))");
}

std::string row_state(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT (SELECT state FROM jobs WHERE id = " + std::to_string(id)
                + ")");
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Claims up to `limit` jobs of the default queue, which must be `n`.
std::vector<aw::claimed_job> claim_exactly(job_store& store, int limit, size_t n) {
  auto jobs = aw::test::claim_settled(store, "default", limit).jobs;
  BOOST_REQUIRE_EQUAL(jobs.size(), n);
  return jobs;
}

// The batches that closed, two hours ago.
void age(aw::test::db_session& s) {
  s.exec("UPDATE claim_batches SET closed_at = closed_at - interval '2 hours' "
         "WHERE closed_at IS NOT NULL");
}

} // namespace

BOOST_AUTO_TEST_SUITE(pack_test)

BOOST_AUTO_TEST_CASE(packed_jobs_get_block_ids_in_request_order) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Two lanes interleaved, a job with an option (a row of its own) among
  // them, and more jobs of one lane than a pack holds.
  auto requests = noops(3, "a");
  auto b = noops(2, "b");
  requests.insert(requests.begin() + 1, b.begin(), b.end());
  aw::enqueue_request delayed;
  delayed.kind = "noop";
  delayed.options.queue = "a";
  delayed.options.delay = 1h;
  requests.push_back(delayed);
  auto many = noops(static_cast<int>(aw::defaults::max_pack_jobs) + 5, "c");
  requests.insert(requests.end(), many.begin(), many.end());
  auto ids = enqueue(db, requests);
  BOOST_REQUIRE_EQUAL(ids.size(), requests.size());

  // a: ids[0], ids[3], ids[4] consecutive in one pack; b: ids[1], ids[2].
  BOOST_TEST(ids[0] >= first_packed_id);
  BOOST_TEST(ids[0] % 1024 == 0);
  BOOST_TEST(ids[3] == ids[0] + 1);
  BOOST_TEST(ids[4] == ids[0] + 2);
  BOOST_TEST(ids[2] == ids[1] + 1);
  BOOST_TEST(ids[5] < first_packed_id); // the delayed job: a row
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 4); // a, b, c twice
  BOOST_TEST(s.scalar("SELECT count(*) FROM packed_jobs") == 5 + 1029);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == 1);
  BOOST_TEST(packed_state(s, ids[3]) == "available");
  BOOST_TEST(s.text("SELECT args::text FROM packed_jobs WHERE id = "
                    + std::to_string(ids[4]))
             == R"({"n": 2})");
  BOOST_TEST(s.text("SELECT queue FROM packed_jobs WHERE id = "
                    + std::to_string(ids[1]))
             == "b");

  // `jobs show` and `jobs list` read them; the list pages on past the rows.
  auto conn = db.connect();
  auto shown = aw::storage::job_json(*conn, ids[4]);
  BOOST_REQUIRE(shown.has_value());
  BOOST_TEST(nlohmann::json::parse(*shown)["kind"] == "noop");
  BOOST_TEST(!aw::storage::job_json(*conn, ids[4] + 2000).has_value());
  aw::storage::job_filter f;
  f.queue = "a";
  auto page = nlohmann::json::parse(aw::storage::jobs_json(*conn, f));
  BOOST_REQUIRE_EQUAL(page.size(), 4u);
  BOOST_TEST(page[0]["id"].get<int64_t>() == ids[5]);
  BOOST_TEST(page[1]["id"].get<int64_t>() == ids[0]);
  BOOST_TEST(page[3]["id"].get<int64_t>() == ids[4]);
  f.queue = "c";
  f.limit = 1000;
  auto first = nlohmann::json::parse(aw::storage::jobs_json(*conn, f));
  BOOST_REQUIRE_EQUAL(first.size(), 1000u);
  f.after = first.back()["id"].get<int64_t>();
  auto second = nlohmann::json::parse(aw::storage::jobs_json(*conn, f));
  BOOST_TEST(second.size() == 29u);
}

BOOST_AUTO_TEST_CASE(a_claim_takes_rows_and_packed_jobs_in_lane_order) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto before = enqueue(db, noops(2), aw::bulk_layout::rows);
  auto packed = enqueue(db, noops(5));
  auto after = enqueue(db, noops(2), aw::bulk_layout::rows);
  auto more = enqueue(db, noops(3));

  // Part of a pack, then the rest of it and on past it.
  auto one = aw::test::claim_settled(store, "default", 4).jobs;
  BOOST_TEST(ids_of(one) == concat(before, {packed[0], packed[1]}));
  BOOST_TEST(packed_state(s, packed[1]) == "running");
  BOOST_TEST(packed_state(s, packed[2]) == "available");
  auto two = aw::test::claim_settled(store, "default", 100).jobs;
  BOOST_TEST(ids_of(two)
             == concat(concat({packed[2], packed[3], packed[4]}, after), more));
  BOOST_TEST(two[0].args == R"({"n": 2})");
  BOOST_TEST(two[0].attempt == 1);
  BOOST_TEST(two[0].kind == "noop");
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  BOOST_TEST(s.scalar("SELECT count(*) FROM packed_jobs WHERE state = 'running'")
             == 8);
}

BOOST_AUTO_TEST_CASE(outcomes_of_packed_jobs) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(4));
  auto claimed = claim_exactly(store, 10, 4);

  // A completion is a receipt: the job stays in its pack.
  auto reports = store.finish({outcome(claimed[0], outcome_kind::completed),
                               outcome(claimed[1], outcome_kind::retryable_failure,
                                       "boom")});
  BOOST_TEST((aw::test::results(reports)
              == std::vector<aw::finish_result>{aw::finish_result::applied,
                                                aw::finish_result::applied}));
  BOOST_TEST(packed_state(s, ids[0]) == "completed");
  // A failure gets a row: retried on the row-per-state path, out of the pack.
  BOOST_TEST(packed_state(s, ids[1]).empty());
  BOOST_TEST(row_state(s, ids[1]) == "scheduled");
  BOOST_TEST(s.text("SELECT last_error_message FROM jobs WHERE id = "
                    + std::to_string(ids[1]))
             == "boom");
  // A release (a shutdown) gets a row with a fresh lane key: claimed again.
  BOOST_TEST(store.release({claimed[2]}, false) == 1);
  BOOST_TEST(row_state(s, ids[2]) == "available");
  auto again = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE((ids_of(again) == std::vector<int64_t>{ids[2]}));
  BOOST_TEST(again[0].attempt == 1);
  store.finish({outcome(again[0], outcome_kind::completed),
                outcome(claimed[3], outcome_kind::completed)});
  BOOST_TEST(row_state(s, ids[2]) == "completed");
  BOOST_TEST(packed_state(s, ids[3]) == "completed");
  BOOST_TEST(s.scalar("SELECT cardinality(unpacked) FROM job_packs") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches WHERE closed_at IS NULL")
             == 0);
}

BOOST_AUTO_TEST_CASE(an_expired_batch_of_packed_jobs_is_rescued) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(3));
  auto claimed = claim_exactly(store, 10, 3);
  store.finish({outcome(claimed[0], outcome_kind::completed)});
  // The worker died: its batch's heartbeat is older than the window.
  s.exec("UPDATE claim_batches SET heartbeat_at = now() - interval '1 hour'");
  auto rescued = store.rescue(10);
  BOOST_TEST(rescued.size() == 2u);
  BOOST_TEST(packed_state(s, ids[0]) == "completed");
  for (auto id : {ids[1], ids[2]}) {
    BOOST_TEST(packed_state(s, id).empty());
    BOOST_TEST(row_state(s, id) == "scheduled");
    BOOST_TEST(s.scalar("SELECT error_count FROM jobs WHERE id = "
                        + std::to_string(id))
               == 1);
  }
}

BOOST_AUTO_TEST_CASE(kinds_the_worker_cannot_run_are_set_aside) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto requests = noops(3);
  requests[1].kind = "other";
  auto ids = enqueue(db, requests);
  store.serve({"noop"});
  // Claimed until both jobs came (the cluster-wide fence may hold a claim
  // back while another suite's transaction is open), keeping every
  // claim's report of jobs set aside.
  std::vector<aw::claimed_job> jobs;
  std::vector<aw::set_aside_jobs> set_aside;
  aw::test::wait_until(
    [&] {
      auto result = store.claim("default", 10);
      jobs.insert(jobs.end(), result.jobs.begin(), result.jobs.end());
      set_aside.insert(set_aside.end(), result.set_aside.begin(),
                       result.set_aside.end());
      return jobs.size() >= 2;
    },
    10s);
  BOOST_TEST(ids_of(jobs) == (std::vector<int64_t>{ids[0], ids[2]}));
  BOOST_REQUIRE_EQUAL(set_aside.size(), 1u);
  BOOST_TEST(set_aside[0].kind == "other");
  // On the row-per-state path, for a worker that runs it.
  BOOST_TEST(row_state(s, ids[1]) == "available");
  BOOST_TEST(packed_state(s, ids[1]).empty());
  store.serve({"noop", "other"});
  auto other = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_TEST(ids_of(other) == std::vector<int64_t>{ids[1]});
}

BOOST_AUTO_TEST_CASE(packed_jobs_behind_a_transaction_left_open_run_anyway) {
  aw::test::fresh_database db;
  // Someone else's transaction with an id stays open...
  auto idle = db.connect();
  pqxx::work idle_tx{*idle};
  idle_tx.exec("SELECT pg_current_xact_id()");
  auto ids = enqueue(db, noops(3));
  auto store = make_store(db, 1h, 200ms);
  BOOST_TEST(store.claim("default", 10).jobs.empty());
  // ...longer than fence_wait: the packed jobs behind it get rows on the
  // row-per-state path and run.
  std::vector<aw::claimed_job> got;
  aw::test::wait_until(
    [&] {
      for (auto& j : store.claim("default", 10).jobs)
        got.push_back(j);
      return got.size() >= 3;
    },
    10s);
  std::set<int64_t> claimed;
  for (auto& j : got) {
    claimed.insert(j.id);
    BOOST_TEST(j.batch_id == 0);
  }
  BOOST_TEST(claimed == std::set<int64_t>(ids.begin(), ids.end()));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM packed_jobs") == 0);
  idle_tx.abort();
}

BOOST_AUTO_TEST_CASE(admin_cancel_and_retry_of_packed_jobs) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(3));
  auto conn = db.connect();
  auto cancelled = aw::storage::cancel_job(*conn, ids[1], "actor_worker_jobs",
                                           "actor_worker_cancel");
  BOOST_TEST(static_cast<int>(cancelled.result)
             == static_cast<int>(aw::storage::cancel_result::cancelled));
  BOOST_TEST(row_state(s, ids[1]) == "cancelled");
  BOOST_TEST(packed_state(s, ids[1]).empty());
  // The claim passes it by.
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_TEST(ids_of(claimed) == (std::vector<int64_t>{ids[0], ids[2]}));
  // A running packed job gets a cancel request (its worker stops it).
  auto requested = aw::storage::cancel_job(*conn, ids[2], "actor_worker_jobs",
                                           "actor_worker_cancel");
  BOOST_TEST(static_cast<int>(requested.result)
             == static_cast<int>(aw::storage::cancel_result::requested));
  BOOST_TEST(store.cancel_requests({ids[2]}) == std::vector<int64_t>{ids[2]});
  BOOST_TEST(store.delete_expired(100) == 0); // the request stays
  BOOST_TEST(store.cancel_requests({ids[2]}) == std::vector<int64_t>{ids[2]});
  store.finish({outcome(claimed[0], outcome_kind::completed),
                outcome(claimed[1], outcome_kind::cancelled, "asked to")});
  BOOST_TEST(row_state(s, ids[2]) == "cancelled");
  // A completed packed job runs again on `jobs retry`.
  auto retried = aw::storage::retry_job(*conn, ids[0], "actor_worker_jobs");
  BOOST_TEST(static_cast<int>(retried.result)
             == static_cast<int>(aw::storage::retry_result::rerun));
  BOOST_TEST(row_state(s, ids[0]) == "available");
  auto rerun = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE((ids_of(rerun) == std::vector<int64_t>{ids[0]}));
  BOOST_TEST(rerun[0].attempt == 2);
}

BOOST_AUTO_TEST_CASE(retention_deletes_a_finished_pack_whole) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(4));
  auto later = enqueue(db, noops(2));
  auto claimed = aw::test::claim_settled(store, "default", 4).jobs;
  BOOST_REQUIRE((ids_of(claimed) == ids));
  std::vector<aw::job_outcome> done;
  for (auto& j : claimed)
    done.push_back(outcome(j, outcome_kind::completed));
  store.finish(done);
  // Within the retention: kept, and shown as completed.
  BOOST_TEST(store.delete_expired(100) == 0);
  BOOST_TEST(packed_state(s, ids[3]) == "completed");
  age(s);
  // Past it the first pack goes, with its batch's record; the second,
  // not claimed yet, stays.
  BOOST_TEST(store.delete_expired(100) == 4);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM packed_jobs") == 2);
  auto rest = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_TEST(ids_of(rest) == later);
}

BOOST_AUTO_TEST_CASE(a_pack_whose_last_job_left_unclaimed_goes_too) {
  // The cursor never meets the key of a job cancelled before its claim:
  // the pack goes once the cursor is past the last job still in it.
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(3));
  auto conn = db.connect();
  aw::storage::cancel_job(*conn, ids[2], "actor_worker_jobs", "actor_worker_cancel");
  auto claimed = claim_exactly(store, 10, 2);
  store.finish({outcome(claimed[0], outcome_kind::completed),
                outcome(claimed[1], outcome_kind::completed)});
  age(s);
  BOOST_TEST(store.delete_expired(100) == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 0);
  BOOST_TEST(row_state(s, ids[2]) == "cancelled");
}

BOOST_AUTO_TEST_CASE(a_job_its_closed_batch_left_unfinished_is_put_back) {
  // The safety net of 018's retention, for packs: should a batch ever
  // close with a packed job unfinished, the job runs again rather than go
  // with its pack.
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(3));
  auto claimed = claim_exactly(store, 10, 3);
  store.finish({outcome(claimed[0], outcome_kind::completed),
                outcome(claimed[1], outcome_kind::completed)});
  s.exec("UPDATE claim_batches SET closed_at = now(), remaining = 0");
  age(s);
  store.delete_expired(100);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 1);
  BOOST_TEST(row_state(s, ids[2]) == "available");
  auto back = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE((ids_of(back) == std::vector<int64_t>{ids[2]}));
  store.finish({outcome(back[0], outcome_kind::completed)});
  age(s);
  store.delete_expired(100);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 0);
  BOOST_TEST(row_state(s, ids[2]) == "completed");
}

BOOST_AUTO_TEST_CASE(with_retention_zero_a_pack_goes_once_its_jobs_completed) {
  aw::test::fresh_database db;
  auto store = make_store(db, 0ms);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(3));
  auto claimed = claim_exactly(store, 10, 3);
  store.finish({outcome(claimed[0], outcome_kind::completed),
                outcome(claimed[1], outcome_kind::completed)});
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches WHERE closed_at IS NULL")
             == 1);
  store.delete_expired(100);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 1);
  store.finish({outcome(claimed[2], outcome_kind::completed)});
  BOOST_TEST(store.delete_expired(100) == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 0);
}

BOOST_AUTO_TEST_CASE(the_queue_counts_and_events_include_packed_jobs) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue(db, noops(5));
  auto available = [&] {
    for (auto& q : store.sample_queues())
      if (q.queue == "default")
        return q.available;
    return int64_t{0};
  };
  BOOST_TEST(available() == 5);
  store.observe({"noop"});
  auto claimed = claim_exactly(store, 2, 2);
  BOOST_TEST(available() == 3);
  // The started event's row, and the completed one's.
  auto started = nlohmann::json::parse(claimed[0].started_row);
  BOOST_TEST(started["id"].get<int64_t>() == ids[0]);
  BOOST_TEST(started["state"] == "running");
  BOOST_TEST(started["attempt"] == 1);
  BOOST_TEST(started["locked_by"] == "w1");
  auto done = outcome(claimed[0], outcome_kind::completed);
  done.observed = true;
  auto reports = store.finish({done});
  BOOST_REQUIRE(reports[0].has_event);
  auto completed = nlohmann::json::parse(reports[0].event.job_json);
  BOOST_TEST(completed["id"].get<int64_t>() == ids[0]);
  BOOST_TEST(completed["state"] == "completed");
}

BOOST_AUTO_TEST_CASE(the_dashboard_lists_packed_jobs_newest_first) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  auto rows = enqueue(db, noops(2), aw::bulk_layout::rows);
  auto packed = enqueue(db, noops(3));
  auto claimed = claim_exactly(store, 3, 3);
  store.finish({outcome(claimed[2], outcome_kind::completed)}); // packed[0]
  auto conn = db.connect();
  auto list = [&](const std::string& state, int64_t before = 0) {
    aw::storage::dashboard_job_filter f;
    f.state = state;
    f.before = before;
    std::vector<int64_t> ids;
    for (auto& row : nlohmann::json::parse(aw::storage::dashboard_jobs(*conn, f).rows))
      ids.push_back(row["id"].get<int64_t>());
    return ids;
  };
  BOOST_TEST(list("") == (std::vector<int64_t>{packed[2], packed[1], packed[0],
                                               rows[1], rows[0]}));
  BOOST_TEST(list("available") == (std::vector<int64_t>{packed[2], packed[1]}));
  BOOST_TEST(list("completed") == (std::vector<int64_t>{packed[0]}));
  BOOST_TEST(list("running") == (std::vector<int64_t>{rows[1], rows[0]}));
  BOOST_TEST(list("", packed[1]) == (std::vector<int64_t>{packed[0], rows[1],
                                                          rows[0]}));
}

BOOST_AUTO_TEST_CASE(bad_packed_input_is_refused_with_the_reason) {
  aw::test::fresh_database db;
  auto requests = noops(2);
  requests[1].kind = "bad\nkind";
  BOOST_CHECK_EXCEPTION(enqueue(db, requests), std::invalid_argument,
                        [](const std::invalid_argument& e) {
                          return std::string{e.what()}.find("control character")
                                 != std::string::npos;
                        });
  // The table checks every job too, for producers that write packs in SQL.
  aw::test::db_session s{db.url};
  try {
    s.exec("INSERT INTO job_packs (first_id, queue, n, kinds, args) "
           "VALUES (nextval('job_pack_blocks'), 'default', 2, '{a,b}', "
           "ARRAY['{}', '[1]']::jsonb[])");
    BOOST_FAIL("a pack with args that are not an object was accepted");
  } catch (const pqxx::check_violation& e) {
    BOOST_TEST(std::string{e.what()}.find("job_packs") != std::string::npos);
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_packs") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
