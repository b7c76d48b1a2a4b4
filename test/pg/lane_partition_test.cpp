// Lane partitions (migrations/019_lane_partitions.sql) against a real
// database: lane rows go to the current generation's partition and every
// other row to job_rows_main; the leader's maintenance starts generations
// and drops a partition whole once all its jobs finished longer ago than
// the retention, never one with a job still to run (running, released,
// not yet claimed, or left unfinished by a closed batch); a job that leaves
// its lane leaves the partition; an interrupted drop is finished next
// round; a lock it cannot get waits for the next round; a generation
// starts only after its partition committed, and no enqueue, however it
// meets a rotation, is routed to a partition its backend does not know
// (021); a database upgraded from 018 with lane jobs claimed, finished and
// waiting loses none.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "actor_worker/storage/migrations.hpp"

using namespace std::chrono_literals;
using aw::outcome_kind;
using aw::test::ids_of;
using aw::storage::job_store;
using aw::test::outcome;

namespace {

// Retention 1 h: a generation lasts 15 min (a quarter of it). The tests
// move time by backdating batches and generations (age()). fence_wait is
// long for the reason lane_test gives.
job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id = "w1") {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.completed_retention = 1h;
  opts.reclaim_window = 120s;
  opts.fence_wait = 30s;
  return job_store{opts};
}

std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db, int n,
                               int64_t delay_ms = 0) {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests) {
    r.kind = "noop";
    if (delay_ms > 0)
      r.options.delay = std::chrono::milliseconds{delay_ms};
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

// Two hours pass for the batches that closed, three for the generations.
void age(aw::test::db_session& s) {
  s.exec("UPDATE claim_batches SET closed_at = closed_at - interval '2 hours' "
         "WHERE closed_at IS NOT NULL");
  s.exec("UPDATE lane_generations "
         "SET started_at = started_at - interval '3 hours'");
}

std::string state_of(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT state FROM jobs WHERE id = " + std::to_string(id));
}

std::string partition_of(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT tableoid::regclass::text FROM job_rows WHERE id = "
                + std::to_string(id));
}

bool exists(aw::test::db_session& s, const std::string& table) {
  return s.check("SELECT to_regclass('" + table + "') IS NOT NULL");
}

bool said(const std::vector<std::string>& lines, const std::string& what) {
  for (auto& l : lines)
    if (l.find(what) != std::string::npos)
      return true;
  return false;
}

// A next generation starts (and gets a job, so that it is not empty), and
// both are past the retention: the first may go, if its jobs let it.
void next_generation_past_retention(job_store& store,
                                    const aw::test::fresh_database& db,
                                    aw::test::db_session& s) {
  age(s);
  BOOST_TEST(said(store.maintain_lane_partitions(), "started"));
  enqueue_n(db, 1);
  age(s);
}

} // namespace

BOOST_AUTO_TEST_SUITE(lane_partition_test)

BOOST_AUTO_TEST_CASE(lane_rows_go_to_the_current_generation_and_claims_read_all) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto first = enqueue_n(db, 3);
  auto later = enqueue_n(db, 1, 3'600'000); // scheduled: off the lanes
  for (auto id : first)
    BOOST_TEST(partition_of(s, id) == "job_rows_lane_1");
  BOOST_TEST(partition_of(s, later[0]) == "job_rows_main");
  // A plain INSERT through the view goes the same way.
  auto plain = s.scalar("INSERT INTO jobs (kind) VALUES ('noop') RETURNING id");
  BOOST_TEST(partition_of(s, plain) == "job_rows_lane_1");

  // Not due yet: nothing happens.
  BOOST_TEST(store.maintain_lane_partitions().empty());
  age(s);
  auto done = store.maintain_lane_partitions();
  BOOST_TEST(said(done, "started lane partition job_rows_lane_2"));
  // A generation still empty is kept (an idle system makes no partitions).
  age(s);
  BOOST_TEST(!said(store.maintain_lane_partitions(), "started"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM lane_generations") == 2);
  auto second = enqueue_n(db, 2);
  for (auto id : second)
    BOOST_TEST(partition_of(s, id) == "job_rows_lane_2");

  // One claim takes the lane in order across both partitions.
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  std::vector<int64_t> expected = first;
  expected.push_back(plain);
  expected.insert(expected.end(), second.begin(), second.end());
  BOOST_TEST(ids_of(claimed) == expected);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'")
             == 6);

}

BOOST_AUTO_TEST_CASE(a_partition_goes_whole_once_its_jobs_are_past_the_retention) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue_n(db, 4);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  for (int i = 0; i < 3; ++i)
    store.finish({outcome(claimed[static_cast<size_t>(i)],
                          outcome_kind::completed)});
  age(s);
  BOOST_TEST(said(store.maintain_lane_partitions(), "started"));
  enqueue_n(db, 1); // the new generation is not empty
  // The next generation started just now: too early for the first to go.
  BOOST_TEST(!said(store.maintain_lane_partitions(), "dropped"));
  age(s);
  // A job of the batch still runs: it stays.
  BOOST_TEST(!said(store.maintain_lane_partitions(), "dropped"));
  BOOST_TEST(exists(s, "job_rows_lane_1"));
  BOOST_TEST(state_of(s, ids[3]) == "running");
  // Its batch closes, but within the retention: it stays.
  store.finish({outcome(claimed[3], outcome_kind::completed)});
  BOOST_TEST(!said(store.maintain_lane_partitions(), "dropped"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
             == 4);

  // Past the retention it goes whole, and the batch's record after it.
  age(s);
  auto done = store.maintain_lane_partitions();
  BOOST_TEST(said(done, "dropped lane partition job_rows_lane_1"));
  BOOST_TEST(!exists(s, "job_rows_lane_1"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows WHERE id = ANY ('{"
                      + std::to_string(ids[0]) + "," + std::to_string(ids[3])
                      + "}')") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == 1);
  BOOST_TEST(s.scalar("SELECT min(gen) FROM lane_generations") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 1);
  BOOST_TEST(store.delete_expired(100) == 0); // no row left to delete
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM batch_completions") == 0);
  // The job of the current generation is untouched and still claimed.
  auto next = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_TEST(next.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_partition_with_a_job_not_yet_claimed_stays) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue_n(db, 3);
  auto claimed = aw::test::claim_settled(store, "default", 2).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
  store.finish({outcome(claimed[0], outcome_kind::completed),
                outcome(claimed[1], outcome_kind::completed)});
  next_generation_past_retention(store, db, s);
  BOOST_TEST(!said(store.maintain_lane_partitions(), "dropped"));
  BOOST_TEST(exists(s, "job_rows_lane_1"));
  auto rest = aw::test::claim_settled(store, "default", 1).jobs;
  BOOST_REQUIRE((ids_of(rest) == std::vector<int64_t>{ids[2]}));
}

BOOST_AUTO_TEST_CASE(jobs_that_leave_their_lane_leave_the_partition) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue_n(db, 3);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  // ids[0] fails: retried on the row-per-state path, from job_rows_main.
  store.finish({outcome(claimed[0], outcome_kind::retryable_failure, "boom"),
                outcome(claimed[2], outcome_kind::completed)});
  BOOST_TEST(partition_of(s, ids[0]) == "job_rows_main");
  BOOST_TEST(state_of(s, ids[0]) == "scheduled");
  // (Its backoff is seconds: on a loaded machine the claims below would
  // meet it due. It stays out of their way.)
  s.exec("UPDATE job_rows SET run_at = now() + interval '1 hour' WHERE id = "
         + std::to_string(ids[0]));
  // ids[1] is released (a shutdown): a fresh lane key, past the cursor.
  BOOST_TEST(store.release({claimed[1]}, false) == 1);
  next_generation_past_retention(store, db, s);
  BOOST_TEST(!said(store.maintain_lane_partitions(), "dropped"));
  // Claimed again (with the new generation's job) and completed, the
  // partition goes; the failed job stays where it is.
  auto again = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(again.size(), 2u);
  BOOST_TEST(again[0].id == ids[1]);
  store.finish({outcome(again[0], outcome_kind::completed),
                outcome(again[1], outcome_kind::completed)});
  age(s);
  BOOST_TEST(said(store.maintain_lane_partitions(),
                  "dropped lane partition job_rows_lane_1"));
  BOOST_TEST(state_of(s, ids[0]) == "scheduled");
  BOOST_TEST(s.text("SELECT last_error_message FROM jobs WHERE id = "
                    + std::to_string(ids[0])) == "boom");
}

BOOST_AUTO_TEST_CASE(an_unfinished_job_left_by_a_closed_batch_is_put_back) {
  // The safety net of 018's retention, for partitions: should a batch
  // ever close with a job unfinished, the job runs again rather than go
  // with its partition.
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  auto ids = enqueue_n(db, 3);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  store.finish({outcome(claimed[0], outcome_kind::completed),
                outcome(claimed[1], outcome_kind::completed)});
  s.exec("UPDATE claim_batches SET closed_at = now(), remaining = 0");
  age(s);
  store.maintain_lane_partitions();
  age(s);
  BOOST_TEST(!said(store.maintain_lane_partitions(), "dropped"));
  BOOST_TEST(partition_of(s, ids[2]) == "job_rows_lane_2");
  BOOST_TEST(state_of(s, ids[2]) == "available");
  auto back = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE((ids_of(back) == std::vector<int64_t>{ids[2]}));
  store.finish({outcome(back[0], outcome_kind::completed)});
  age(s);
  BOOST_TEST(said(store.maintain_lane_partitions(),
                  "dropped lane partition job_rows_lane_1"));
  BOOST_TEST(state_of(s, ids[2]) == "completed");
}

BOOST_AUTO_TEST_CASE(a_partition_detached_but_not_dropped_goes_next_round) {
  // The process died between DETACH and DROP.
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  enqueue_n(db, 1);
  age(s);
  store.maintain_lane_partitions();
  s.exec("ALTER TABLE job_rows DETACH PARTITION job_rows_lane_1");
  auto done = store.maintain_lane_partitions();
  BOOST_TEST(said(done, "dropped lane partition job_rows_lane_1"));
  BOOST_TEST(!exists(s, "job_rows_lane_1"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM lane_generations") == 1);
  // New jobs still go to the current generation.
  auto id = enqueue_n(db, 1)[0];
  BOOST_TEST(partition_of(s, id) == "job_rows_lane_2");
}

BOOST_AUTO_TEST_CASE(an_enqueue_across_a_rotation_lands_in_a_partition_it_knows) {
  // A backend takes in a new partition only when it next acquires a lock
  // it does not hold yet, while each statement's snapshot sees the new
  // generation at once. A transaction that locked job_rows before the
  // rotation committed and enqueues after it must not be routed to the
  // new partition (021; the soak of 2026-12-02 met "no partition of
  // relation job_rows found for row" this way). Every enqueue path: the
  // view's INSERT rule, both bulk statements, and unpacking a packed job.
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  enqueue_n(db, 1);
  int64_t packed_id = 0;
  {
    auto conn = db.connect();
    pqxx::work tx{*conn};
    std::vector<aw::enqueue_request> one(1);
    one[0].kind = "noop";
    packed_id = aw::enqueue_many(tx, one, aw::bulk_layout::packed)[0];
    tx.commit();
  }
  age(s);

  auto conn = db.connect();
  pqxx::work tx{*conn};
  std::vector<aw::enqueue_request> plain(1), tagged(1);
  plain[0].kind = "noop";
  tagged[0].kind = "noop";
  tagged[0].options.tags = {"t"};
  std::vector<int64_t> ids;
  auto add = [&](const std::vector<int64_t>& more) {
    ids.insert(ids.end(), more.begin(), more.end());
  };
  auto via_view = [&] {
    return tx.exec1("INSERT INTO jobs (kind) VALUES ('noop') RETURNING id")[0]
      .as<int64_t>();
  };
  // Every lock an enqueue takes is held from here on.
  add(aw::enqueue_many(tx, plain));
  add(aw::enqueue_many(tx, tagged));
  ids.push_back(via_view());
  tx.exec("SELECT actor_worker_unpack(ARRAY[0]::bigint[])");

  BOOST_TEST(said(store.maintain_lane_partitions(),
                  "started lane partition job_rows_lane_2"));
  add(aw::enqueue_many(tx, plain));
  add(aw::enqueue_many(tx, tagged));
  ids.push_back(via_view());
  BOOST_TEST(tx.exec1("SELECT actor_worker_unpack(ARRAY["
                      + std::to_string(packed_id) + "]::bigint[])")[0]
               .as<int>()
             == 1);
  tx.commit();
  ids.push_back(packed_id);
  for (auto id : ids)
    BOOST_TEST(partition_of(s, id) == "job_rows_lane_1");
  // A transaction that starts after the rotation uses the new partition.
  auto later = enqueue_n(db, 1);
  BOOST_TEST(partition_of(s, later[0]) == "job_rows_lane_2");
  BOOST_TEST(aw::test::claim_settled(store, "default", 20).jobs.size()
             == ids.size() + 2);
}

BOOST_AUTO_TEST_CASE(a_generation_starts_only_after_its_partition_committed) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  enqueue_n(db, 1);
  {
    // Both steps in one transaction: the second may not start what the
    // first added, and nothing goes to the pending partition.
    auto conn = db.connect();
    pqxx::work tx{*conn};
    BOOST_TEST(tx.exec1("SELECT actor_worker_rotate_lanes(0)")[0].is_null());
    BOOST_TEST(tx.exec1("SELECT actor_worker_rotate_lanes(0)")[0].is_null());
    tx.commit();
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM lane_generations "
                      "WHERE started_at IS NULL") == 1);
  auto id = enqueue_n(db, 1)[0];
  BOOST_TEST(partition_of(s, id) == "job_rows_lane_1");
  BOOST_TEST(s.scalar("SELECT actor_worker_rotate_lanes(0)") == 2);
  BOOST_TEST(partition_of(s, enqueue_n(db, 1)[0]) == "job_rows_lane_2");
  BOOST_TEST(s.scalar("SELECT count(*) FROM lane_generations "
                      "WHERE started_at IS NULL") == 0);
}

BOOST_AUTO_TEST_CASE(enqueues_racing_rotations_never_miss_a_partition) {
  // The race itself: a statement locks job_rows (and takes in every
  // partition known then), the rotation commits, and the statement's
  // snapshot, taken after, sees the new generation. Producers enqueue as
  // fast as they can through a prepared INSERT and the bulk statements
  // while the maintenance rotates again and again; none may fail.
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  enqueue_n(db, 1);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> enqueued{0};
  std::vector<std::string> errors;
  std::mutex errors_mutex;
  auto producer = [&](int n) {
    try {
      auto conn = db.connect();
      conn->prepare("aw_test_insert", "INSERT INTO jobs (kind) VALUES ('noop')");
      std::vector<aw::enqueue_request> two(2);
      two[0].kind = two[1].kind = "noop";
      two[1].options.tags = {"t"};
      while (!stop.load()) {
        if (n == 0) {
          pqxx::work tx{*conn};
          aw::enqueue_many(tx, two);
          tx.commit();
          enqueued += 2;
        } else {
          pqxx::nontransaction tx{*conn};
          tx.exec_prepared("aw_test_insert");
          ++enqueued;
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock{errors_mutex};
      errors.push_back(e.what());
    }
  };
  std::vector<std::thread> producers;
  for (int n = 0; n < 3; ++n)
    producers.emplace_back(producer, n);
  // (A round starts none when the producers have not yet put a job in
  // the current generation, or the attach waited past its lock timeout.)
  int started = 0;
  for (int round = 0; started < 30 && round < 300 && errors.empty(); ++round) {
    age(s);
    if (said(store.maintain_lane_partitions(), "started"))
      ++started;
  }
  stop = true;
  for (auto& t : producers)
    t.join();
  BOOST_TEST(errors.empty(), (errors.empty() ? std::string{} : errors[0]));
  BOOST_TEST(started == 30);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == enqueued.load() + 1);
}

BOOST_AUTO_TEST_CASE(a_lock_it_cannot_get_waits_for_the_next_round) {
  aw::test::fresh_database db;
  auto store = make_store(db);
  aw::test::db_session s{db.url};
  enqueue_n(db, 1);
  age(s);
  {
    // What ATTACH needs, held by another session.
    auto other = db.connect();
    pqxx::work tx{*other};
    tx.exec("LOCK TABLE job_rows IN SHARE UPDATE EXCLUSIVE MODE");
    auto done = store.maintain_lane_partitions();
    BOOST_TEST(said(done, "lock timeout"));
    BOOST_TEST(s.scalar("SELECT count(*) FROM lane_generations") == 1);
    // Enqueues and claims go on meanwhile.
    enqueue_n(db, 1);
    BOOST_TEST(aw::test::claim_settled(store, "default", 10).jobs.size()
               == 2u);
  }
  BOOST_TEST(said(store.maintain_lane_partitions(), "started"));
}

BOOST_AUTO_TEST_CASE(an_upgrade_from_018_keeps_every_lane_job_where_it_was) {
  aw::test::fresh_database db{false};
  {
    // The schema of 018, with lane jobs as its workers left them.
    auto conn = db.connect();
    pqxx::work tx{*conn};
    tx.exec("CREATE TABLE actor_worker_migrations (version integer PRIMARY "
            "KEY, name text NOT NULL, applied_at timestamptz NOT NULL "
            "DEFAULT now())");
    for (auto& m : aw::storage::embedded_migrations())
      if (m.version <= 18) {
        tx.exec(m.sql);
        tx.exec_params("INSERT INTO actor_worker_migrations (version, name) "
                       "VALUES ($1, $2)",
                       m.version, m.name);
      }
    tx.commit();
  }
  db.exec("INSERT INTO jobs (kind) SELECT 'noop' FROM generate_series(1, 6)");
  // 018's claim takes four; two of them complete. (Again while the
  // cluster-wide commit-order fence holds them back: another suite's open
  // transaction, as claim_settled knows.)
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (db.scalar("SELECT count(*) FROM claim_batches") == 0
         && std::chrono::steady_clock::now() < give_up) {
    db.exec("SELECT * FROM actor_worker_claim('default', 'old', 4, 1000000, "
            "60000, '{}', 30000)");
    if (db.scalar("SELECT count(*) FROM claim_batches") == 0)
      std::this_thread::sleep_for(20ms);
  }
  BOOST_REQUIRE(db.scalar("SELECT size FROM claim_batches") == 4);
  db.exec("INSERT INTO batch_completions (batch_id, ids) "
          "SELECT id, ARRAY[lo_id + 1, lo_id + 2] FROM claim_batches");
  db.exec("UPDATE claim_batches SET remaining = remaining - 2");
  BOOST_REQUIRE(db.scalar("SELECT count(*) FROM jobs WHERE state = "
                          "'completed'") == 2);

  auto report = aw::storage::migrate(db.url);
  BOOST_TEST(report.from_version == 18);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_rows_main") == 6);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
             == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'")
             == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'available'")
             == 2);
  // New jobs go to the first lane partition; a claim takes the old lane
  // rows first, then the new ones, in one lane.
  auto fresh = enqueue_n(db, 2);
  BOOST_TEST(partition_of(s, fresh[0]) == "job_rows_lane_1");
  auto store = make_store(db);
  auto claimed = aw::test::claim_settled(store, "default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  BOOST_TEST(claimed[2].id == fresh[0]);
  std::vector<aw::job_outcome> outcomes;
  for (auto& j : claimed)
    outcomes.push_back(outcome(j, outcome_kind::completed));
  store.finish(outcomes);
  // The old batch's running jobs finish through the new schema too.
  db.exec("UPDATE claim_batches SET remaining = 0, closed_at = now() "
          "WHERE worker = 'old'");
  db.exec("INSERT INTO batch_completions (batch_id, ids) "
          "SELECT id, ARRAY[lo_id + 3, lo_id + 4] FROM claim_batches "
          "WHERE worker = 'old'");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
             == 8);
  // Past the retention: the old batch's rows go row by row. A new batch
  // that took old rows and new ones keeps its old rows until the new ones
  // went with their partition (until then it says they completed). (Its
  // old rows go at once when the fence held the new rows back and a
  // second claim took them: claim_settled claims again.)
  age(s);
  auto first = store.delete_expired(100);
  BOOST_TEST((first == 4 || first == 6));
  BOOST_TEST(said(store.maintain_lane_partitions(), "started"));
  enqueue_n(db, 1);
  age(s);
  BOOST_TEST(said(store.maintain_lane_partitions(), "dropped"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
             == 6 - first);
  BOOST_TEST(store.delete_expired(100) == 6 - first);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM claim_batches") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
