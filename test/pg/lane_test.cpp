// The storage model of docs/storage.md against a real database, through
// job_store: lanes claimed a tick at a time (two snapshots), so that a
// transaction left open anywhere holds nothing back and a late commit is
// never skipped; batches as leases (run identity, release, rescue);
// receipts; jobs moved off the lanes and claimed as rows; jobs_live; and
// the ring's retention, which empties a slot whole and carries every row
// still needed into the current slot.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "actor_worker/storage/queue_samples.hpp"

using namespace std::chrono_literals;
using aw::outcome_kind;
using aw::storage::job_store;
using aw::test::ids_of;
using aw::test::outcome;

namespace {

job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id,
                     std::chrono::milliseconds retention = 1h) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.completed_retention = retention;
  opts.reclaim_window = 120s;
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

/// Claims every job of the default queue, a thousand at a time, and
/// completes each: a lane's finished history.
void claim_and_complete_all(job_store& store) {
  for (;;) {
    auto claimed = store.claim("default", 1000).jobs;
    if (claimed.empty())
      return;
    std::vector<aw::job_outcome> done;
    for (auto& j : claimed)
      done.push_back(outcome(j, outcome_kind::completed));
    for (auto& r : store.finish(done))
      BOOST_REQUIRE(r.result == aw::finish_result::applied);
  }
}

std::string state_of(aw::test::db_session& s, int64_t id) {
  return s.text("SELECT state FROM jobs_live WHERE id = " + std::to_string(id));
}

std::vector<aw::held_job> held_of(const std::vector<aw::claimed_job>& jobs) {
  std::vector<aw::held_job> out;
  for (auto& j : jobs)
    out.push_back({j.id, j.lease, 0});
  return out;
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

/// The ring slot `ahead` slots after the current one (with a retention
/// of 0, every slot but the current one is due for emptying).
std::string ring_slot(aw::test::db_session& s, int ahead) {
  return std::to_string(
    s.scalar("SELECT (actor_worker_slot() + " + std::to_string(ahead) + ") % 8"));
}

/// n one-job lane batches of `queue` (finished or not), and statistics
/// that saw them: what makes a generic plan that walks a ring slot's
/// batches show in its row counts.
void add_lane_batches(aw::test::db_session& s, const std::string& queue, int n,
                      bool finished) {
  s.exec("INSERT INTO job_batches (id, queue, priority, worker, on_lane, size, finished_at) "
         "SELECT actor_worker_batch_id(true), " + s.conn.quote(queue) + ", 0, 'w0', true, 1, "
         + (finished ? "now()" : "NULL") + " FROM generate_series(1, " + std::to_string(n) + ")");
  s.exec("ANALYZE job_batches");
}

/// Whether one of the lines maintain_ring() returned says `what`.
bool says(const std::vector<std::string>& did, const std::string& what) {
  return std::any_of(did.begin(), did.end(), [&](const std::string& line) {
    return line.find(what) != std::string::npos;
  });
}

/// A connection that holds a transaction id open until destroyed, as an
/// idle-in-transaction client does: `BEGIN; SELECT txid_current();`.
struct open_transaction {
  explicit open_transaction(const std::string& url) : conn(url), tx(conn) {
    tx.exec("SELECT txid_current()");
  }
  pqxx::connection conn;
  pqxx::work tx;
};

/// The plans of every statement this session runs from now on, nested ones
/// included (auto_explain, sent to the session as notices).
struct plan_notices final : pqxx::errorhandler {
  explicit plan_notices(aw::test::db_session& s) : pqxx::errorhandler(s.conn) {
    s.exec("LOAD 'auto_explain'");
    s.exec("SET auto_explain.log_min_duration = 0");
    s.exec("SET auto_explain.log_nested_statements = on");
    s.exec("SET auto_explain.log_analyze = on");
    s.exec("SET auto_explain.log_level = notice");
  }
  bool operator()(const char msg[]) noexcept override {
    text += msg;
    return true;
  }
  std::string text;
};

/// The statement NAME of storage/sql/ (the block under its `-- name: NAME`
/// line, as cmake/EmbedStatements.cmake cuts it), which the runtime prepares.
std::string statement_file(const std::string& name) {
  const std::string marker = "-- name: ";
  for (const auto& entry :
       std::filesystem::directory_iterator{std::string{AW_SOURCE_DIR} + "/storage/sql"}) {
    if (entry.path().extension() != ".sql")
      continue;
    std::ifstream in{entry.path()};
    std::string line, text;
    bool inside = false;
    while (std::getline(in, line)) {
      if (line.rfind(marker, 0) == 0) {
        if (inside)
          break;
        inside = line.substr(marker.size()) == name;
        continue;
      }
      if (inside)
        text += line + "\n";
    }
    if (inside)
      return text;
  }
  BOOST_FAIL("no statement `-- name: " << name << "` in storage/sql/*.sql");
  return {};
}

} // namespace

BOOST_AUTO_TEST_SUITE(lane_test)

BOOST_AUTO_TEST_CASE(a_lane_claim_and_its_completions_write_no_job_row) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 10);
  auto store = make_store(db, "w1");
  auto first = store.claim("default", 4).jobs;
  BOOST_REQUIRE_EQUAL(first.size(), 4u);
  BOOST_TEST(ids_of(first) == std::vector<int64_t>(ids.begin(), ids.begin() + 4),
             boost::test_tools::per_element());
  for (auto& j : first) {
    BOOST_TEST(j.attempt == 1);
    BOOST_TEST(j.lease == first.front().lease); // one batch
  }
  aw::test::db_session s{db.url};
  BOOST_TEST(state_of(s, ids[0]) == "running");
  BOOST_TEST(s.text("SELECT locked_by FROM jobs_live WHERE id = "
                    + std::to_string(ids[0])) == "w1");
  BOOST_TEST(state_of(s, ids[5]) == "available");
  // The rows themselves are as inserted: the claim wrote one batch row.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE state = 'available' "
                      "AND attempt = 0 AND batch_id IS NULL") == 10);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches") == 1);

  auto reports = store.finish({outcome(first, ids[0], outcome_kind::completed),
                               outcome(first, ids[1], outcome_kind::completed)});
  BOOST_TEST(reports.size() == 2u);
  for (auto& r : reports)
    BOOST_TEST((r.result == aw::finish_result::applied));
  BOOST_TEST(state_of(s, ids[0]) == "completed");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE finalized_at IS NOT NULL") == 2);
  BOOST_TEST(state_of(s, ids[2]) == "running");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE state = 'available' "
                      "AND batch_id IS NULL") == 10);
  // A completion recorded twice (a commit in doubt, sent again) counts once.
  store.finish({outcome(first, ids[0], outcome_kind::completed)}, true);
  BOOST_TEST(state_of(s, ids[0]) == "completed");

  // The rest comes in order, the lane's next tick included.
  auto later = enqueue_n(db, 3);
  auto second = store.claim("default", 100).jobs;
  std::vector<int64_t> expected(ids.begin() + 4, ids.end());
  expected.insert(expected.end(), later.begin(), later.end());
  BOOST_TEST(ids_of(second) == expected, boost::test_tools::per_element());
  BOOST_TEST(store.claim("default", 100).jobs.empty());
}

BOOST_AUTO_TEST_CASE(a_transaction_left_open_anywhere_holds_no_job_back) {
  aw::test::fresh_database db;
  // One in another database of the server, one in the queue's own: each
  // holds a transaction id, the cluster's oldest.
  open_transaction elsewhere{aw::test::server_url()};
  open_transaction here{db.url};
  auto store = make_store(db, "w1");
  for (int round = 0; round < 3; ++round) {
    auto ids = enqueue_n(db, 50);
    auto claimed = store.claim("default", 100).jobs;
    BOOST_TEST(ids_of(claimed) == ids, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(a_job_whose_transaction_commits_late_is_claimed_in_a_later_tick) {
  aw::test::fresh_database db;
  auto store = make_store(db, "w1");
  // T1 inserts first (the smaller id and transaction id) but commits last.
  auto slow = db.connect();
  pqxx::work t1{*slow};
  auto late = aw::enqueue(t1, "noop", nlohmann::json::object());
  auto early = enqueue_n(db, 2);
  auto first = store.claim("default", 100).jobs;
  BOOST_TEST(ids_of(first) == early, boost::test_tools::per_element());
  t1.commit();
  auto second = store.claim("default", 100).jobs;
  BOOST_REQUIRE_EQUAL(second.size(), 1u);
  BOOST_TEST(second[0].id == late);
  aw::test::db_session s{db.url};
  BOOST_TEST(state_of(s, late) == "running");
  BOOST_TEST(state_of(s, early[0]) == "running");
}

BOOST_AUTO_TEST_CASE(a_job_committed_after_the_claim_began_is_taken_from_its_lane) {
  aw::test::fresh_database db;
  // The claim's transaction begins (its now() is fixed), then a producer's
  // transaction begins and commits a job due at once (run_at: its own
  // now(), later than the claim's); then the claim reads its tick, which
  // sees that job. The job is due: the claim takes it from its lane rather
  // than moving it off as scheduled (a steady producer once sent most of
  // its jobs off the lanes this way).
  auto claimer = db.connect();
  pqxx::work claim{*claimer};
  claim.exec("SELECT now()");
  std::this_thread::sleep_for(20ms);
  auto id = enqueue_n(db, 1).at(0);
  auto rows = claim.exec("SELECT lease, id FROM actor_worker_claim("
                         "'default', 'w1', 10, 1000000, NULL, '{}', 2000) WHERE id IS NOT NULL");
  claim.commit();
  BOOST_REQUIRE_EQUAL(rows.size(), 1u);
  BOOST_TEST(rows[0]["id"].as<int64_t>() == id);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE ready_xid = '0'") == 0);
  BOOST_TEST(state_of(s, id) == "running");
}

BOOST_AUTO_TEST_CASE(one_large_transaction_is_claimed_a_batch_at_a_time) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 1000);
  auto store = make_store(db, "w1");
  std::vector<int64_t> seen;
  std::set<int64_t> leases;
  for (int i = 0; i < 4; ++i) {
    auto part = store.claim("default", 300).jobs;
    for (auto& j : part) {
      seen.push_back(j.id);
      leases.insert(j.lease);
    }
  }
  BOOST_TEST(seen == ids, boost::test_tools::per_element());
  BOOST_TEST(leases.size() == 4u);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'") == 1000);
}

BOOST_AUTO_TEST_CASE(a_claim_after_one_that_used_up_its_tick_starts_a_new_tick_at_once) {
  // A lane batch notes whether it took its tick's last job (tick_done);
  // then the lane's next claim reads only a new tick (one read of the lane,
  // actor_worker_lane_pick) instead of first reading the rest of a used-up
  // one. Counted with the function statistics of the claim's transaction.
  aw::test::fresh_database db;
  auto claimer = db.connect();
  // One claim in its own transaction: (jobs claimed, reads of the lane).
  auto claim = [&](int limit) {
    pqxx::work tx{*claimer};
    tx.exec0("SET LOCAL track_functions = 'all'");
    // (The counts are the session's not yet reported ones: take a difference.)
    const std::string calls = "SELECT coalesce(pg_stat_get_xact_function_calls("
                              "'actor_worker_lane_pick'::regproc), 0)";
    auto before = tx.exec1(calls)[0].as<int>();
    auto n = tx.exec1("SELECT count(*) FROM actor_worker_claim('default', 'w1', "
                      + std::to_string(limit)
                      + ", 1000000, NULL, '{}', 2000) WHERE id IS NOT NULL")[0]
               .as<int>();
    auto reads = tx.exec1(calls)[0].as<int>() - before;
    tx.commit();
    return std::make_pair(n, reads);
  };
  aw::test::db_session s{db.url};
  auto newest_done = [&] {
    return s.check("SELECT tick_done FROM job_batches WHERE on_lane "
                   "ORDER BY id DESC LIMIT 1");
  };
  enqueue_n(db, 3);
  BOOST_TEST((claim(10) == std::make_pair(3, 1)));  // the lane's first claim
  BOOST_TEST(newest_done());
  enqueue_n(db, 2);
  BOOST_TEST((claim(10) == std::make_pair(2, 1)));  // a new tick at once
  BOOST_TEST(newest_done());
  enqueue_n(db, 3);
  BOOST_TEST((claim(1) == std::make_pair(1, 1)));   // the tick has more
  BOOST_TEST(!newest_done());
  BOOST_TEST((claim(10) == std::make_pair(2, 2)));  // its rest, then a new tick
  BOOST_TEST(newest_done());
  BOOST_TEST((claim(10) == std::make_pair(0, 1)));  // nothing new: one read
}

BOOST_AUTO_TEST_CASE(a_claim_returns_what_it_picked_whichever_slots_hold_it) {
  // The claim picks a lane's jobs (actor_worker_lane_pick), moves off the
  // lane those it may not take, and reads the picked ones again straight
  // into its result, from the ring slots between the lowest and highest
  // that hold one. One tick spread over slots 7, 0, 3 and 5, with a job of
  // a kind the worker lacks and one not due between them.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO jobs_in (kind, args, slot, run_at) VALUES "
         "('a', '{\"n\": 1}', 7, now()), ('b', '{\"n\": 0}', 7, now()), "
         "('a', '{\"n\": 2}', 0, now()), "
         "('a', '{\"n\": 3}', 0, now() + interval '1 hour'), "
         "('a', '{\"n\": 4}', 3, now()), ('a', '{\"n\": 5}', 5, now())");
  auto claim = [&](int limit) {
    std::vector<std::string> got;
    for (auto row : s.query(
           "SELECT args, attempt, lease % 2 = 1 AND event_row LIKE '%\"running\"%' "
           "FROM actor_worker_claim('default', 'w1', " + std::to_string(limit)
           + ", 1000000, '{a}', '{a}', 2000) WHERE id IS NOT NULL")) {
      BOOST_TEST(row[1].as<int>() == 1);
      BOOST_TEST(row[2].as<bool>());  // a lane batch's lease, the hooks' row
      got.push_back(row[0].as<std::string>());
    }
    return got;
  };
  BOOST_TEST(claim(3) == (std::vector<std::string>{"{\"n\": 1}", "{\"n\": 2}", "{\"n\": 4}"}),
             boost::test_tools::per_element());
  BOOST_TEST(claim(10) == (std::vector<std::string>{"{\"n\": 5}"}),
             boost::test_tools::per_element());
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE ready_xid = '0'") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'") == 4);
}

BOOST_AUTO_TEST_CASE(a_quiet_lane_reads_its_position_through_the_lane_index) {
  // Statistics that saw one busy queue made the claim's generic plan for a
  // lane's position walk a slot's id index through every batch of the busy
  // lane (23 ms a claim at 57,000 batches); the position must come from
  // job_batches_lane_idx whatever the statistics say.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  add_lane_batches(s, "busy", 20000, false);
  pqxx::work tx{s.conn};
  // As the claim plans it (its SET clauses).
  tx.exec0("SET LOCAL plan_cache_mode = force_generic_plan");
  tx.exec0("SET LOCAL enable_seqscan = off");
  tx.exec0("PREPARE head(text, integer) AS "
           "SELECT * FROM actor_worker_lane_head($1, $2)");
  std::string plan;
  for (auto row : tx.exec("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE head('quiet', 0)"))
    plan += row[0].as<std::string>() + "\n";
  BOOST_TEST_INFO(plan);
  BOOST_TEST(plan.find("queue_priority_id_idx") != std::string::npos);
  BOOST_TEST(!std::regex_search(plan, std::regex{"job_batches_slot_[0-9]+_id_idx"}));
  BOOST_TEST(plan.find("Rows Removed by Filter") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_completion_looks_its_batch_up_by_id) {
  // A completion marks its batch finished once the receipts hold all its
  // jobs. Joined to the receipts by batch id alone, the generic plan read
  // every batch of the ring slot through its id index (1.5 ms at 5,000
  // batches, growing with the slot); it must look the batches up by id.
  // The plan of the statement inside actor_worker_complete, from
  // auto_explain's nested statements, sent to this session as notices.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  add_lane_batches(s, "other", 5000, true);
  s.exec("INSERT INTO jobs_in (kind) VALUES ('k')");
  auto row = s.query("SELECT lease, id FROM actor_worker_claim('default', 'w1', 1, 1000000, "
                     "NULL, '{}', 2000) WHERE id IS NOT NULL");
  BOOST_REQUIRE(row.size() == 1u);
  plan_notices seen{s};
  BOOST_TEST(s.scalar("SELECT actor_worker_complete('w1', ARRAY[" + row[0][0].as<std::string>()
                      + "]::bigint[], ARRAY[" + row[0][1].as<std::string>() + "]::bigint[], false)")
             == row[0][1].as<int64_t>());
  BOOST_TEST(s.check("SELECT finished_at IS NOT NULL FROM job_batches WHERE id = "
                     + row[0][0].as<std::string>()));
  auto update = seen.text.find("Update on job_batches");
  BOOST_TEST_INFO(seen.text);
  BOOST_REQUIRE(update != std::string::npos);
  auto plan = seen.text.substr(update, seen.text.find("CTE deleted", update) - update);
  BOOST_TEST(std::regex_search(plan, std::regex{R"(Index Cond: \(id = ANY)"}));
  BOOST_TEST(!std::regex_search(plan, std::regex{R"(Rows Removed by Filter: [0-9]{3,})"}));
}

BOOST_AUTO_TEST_CASE(outcomes_look_their_batches_up_by_id_however_many_the_worker_has) {
  // Every outcome of lane jobs locks the batches it names. Written as
  // `id = ANY (leases) AND worker = $1`, the generic plan, made while the
  // ring slot was nearly empty (as a fresh slot is), read the worker's
  // index by the worker alone and filtered the ids, so each completion
  // walked all the batches the worker had claimed in the slot since (3,220
  // 20 s into a latency run; for a slot's hours, millions). Here the plans
  // are made on one batch, then the worker claims 5,000 more, which no
  // statistics see, and a completion and a release of lane jobs must still
  // find their batches by id.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO jobs_in (kind) SELECT 'k' FROM generate_series(1, 3)");
  auto claim_one = [&] {
    auto rows = s.query("SELECT lease, id FROM actor_worker_claim('default', 'w1', 1, "
                        "1000000, NULL, '{}', 2000) WHERE id IS NOT NULL");
    BOOST_REQUIRE(rows.size() == 1u);
    return std::make_pair(rows[0][0].as<std::string>(), rows[0][1].as<std::string>());
  };
  auto arrays = [](const std::pair<std::string, std::string>& job) {
    return "ARRAY[" + job.first + "]::bigint[], ARRAY[" + job.second + "]::bigint[]";
  };
  // The plans of this session are made now.
  auto first = claim_one();
  BOOST_TEST(s.scalar("SELECT actor_worker_complete('w1', " + arrays(first) + ", false)")
             == std::stoll(first.second));
  BOOST_TEST(s.scalar("SELECT actor_worker_release('w1', ARRAY[1]::bigint[], "
                      "ARRAY[1]::bigint[], false)") == 0);
  s.exec("INSERT INTO job_batches (id, queue, priority, worker, on_lane, size, finished_at) "
         "SELECT actor_worker_batch_id(true), 'other', 0, 'w1', true, 1, now() "
         "FROM generate_series(1, 5000)");
  auto second = claim_one();
  auto third = claim_one();
  plan_notices seen{s};
  BOOST_TEST(s.scalar("SELECT actor_worker_complete('w1', " + arrays(second) + ", false)")
             == std::stoll(second.second));
  BOOST_TEST(s.scalar("SELECT actor_worker_release('w1', " + arrays(third) + ", false)") == 1);
  BOOST_TEST(state_of(s, std::stoll(second.second)) == "completed");
  BOOST_TEST(state_of(s, std::stoll(third.second)) == "available");
  BOOST_TEST(seen.text.find("job_batches") != std::string::npos);
  BOOST_TEST_INFO(seen.text);
  BOOST_TEST(!std::regex_search(seen.text, std::regex{R"(Rows Removed by Filter: [0-9]{3,})"}));
}

BOOST_AUTO_TEST_CASE(a_late_commit_is_claimed_without_walking_the_slot) {
  // A tick takes the jobs of the transactions its lower snapshot saw
  // running, by their ready_xid, past the position. Written as
  // `ready_xid = x.xid AND id > after`, the generic plan of a slot with
  // history read the slot's id index in id order and filtered every row
  // (400,630 of them, 87 ms, on every claim after a commit that overlapped
  // a claim: in a busy cluster, most claims).
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  const std::string claim = "SELECT count(*) FROM actor_worker_claim('default', 'w1', 2000, "
                            "1000000000, NULL, '{}', 2000) WHERE id IS NOT NULL";
  s.exec("INSERT INTO jobs_in (kind) SELECT 'done' FROM generate_series(1, 5000)");
  while (s.scalar(claim) > 0) {
  }
  s.exec("ANALYZE jobs_in");
  // A session whose plans are made now, on the slot with its history.
  aw::test::db_session fresh{db.url};
  aw::test::db_session late{db.url};
  pqxx::work open{late.conn};
  open.exec0("INSERT INTO jobs_in (kind) VALUES ('late')");
  // A claim while the late job's transaction is open: its tick's upper
  // snapshot sees that transaction running.
  s.exec("INSERT INTO jobs_in (kind) VALUES ('early')");
  BOOST_TEST(fresh.scalar(claim) == 1);
  open.commit();
  plan_notices seen{fresh};
  BOOST_TEST(fresh.scalar(claim) == 1);
  BOOST_TEST(seen.text.find("jobs_slot") != std::string::npos);
  BOOST_TEST_INFO(seen.text);
  BOOST_TEST(!std::regex_search(seen.text, std::regex{R"(Rows Removed by Filter: [0-9]{4,})"}));
}

BOOST_AUTO_TEST_CASE(a_heartbeat_reads_only_what_its_worker_has_not_finished) {
  // Every heartbeat asks which of its leases are still the worker's, and
  // takes back claims it made but does not hold. Read by the worker
  // through job_batches_worker_idx, which keeps every finished batch until
  // the ring empties its slot, the second walked all the worker's batches
  // of the slot (50 ms at 200,000) on every heartbeat.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO job_batches (id, queue, priority, worker, on_lane, size, finished_at) "
         "SELECT actor_worker_batch_id(true), 'default', 0, 'w1', true, 1, now() "
         "FROM generate_series(1, 20000)");
  auto held = s.scalar("INSERT INTO job_batches (id, queue, priority, worker, on_lane, size) "
                       "VALUES (actor_worker_batch_id(true), 'default', 0, 'w1', true, 1) "
                       "RETURNING id");
  s.exec("ANALYZE job_batches");
  pqxx::work tx{s.conn};
  // The generic plan, which a prepared statement settles on.
  tx.exec0("SET LOCAL plan_cache_mode = force_generic_plan");
  tx.exec0("PREPARE leases(bigint[], text) AS " + statement_file("heartbeat"));
  tx.exec0("PREPARE orphans(text, bigint[], double precision) AS "
           + statement_file("take_back_orphans"));
  auto lease = std::to_string(held);
  auto plan_of = [&](const std::string& execute) {
    std::string plan;
    for (auto row : tx.exec("EXPLAIN (ANALYZE, COSTS OFF) " + execute))
      plan += row[0].as<std::string>() + "\n";
    return plan;
  };
  auto leases = plan_of("EXECUTE leases('{" + lease + "}', 'w1')");
  auto orphans = plan_of("EXECUTE orphans('w1', '{" + lease + "}', 0)");
  BOOST_TEST(tx.exec1("EXECUTE leases('{" + lease + "}', 'w1')")[0].as<int64_t>() == held);
  BOOST_TEST_INFO(leases);
  BOOST_TEST(!std::regex_search(leases, std::regex{R"(Rows Removed by Filter: [0-9]{3,})"}));
  BOOST_TEST_INFO(orphans);
  BOOST_TEST(!std::regex_search(orphans, std::regex{R"(Rows Removed by Filter: [0-9]{3,})"}));
}

BOOST_AUTO_TEST_CASE(a_heartbeat_looks_at_a_finished_row_claim_once) {
  // The outcomes of row-claimed jobs do not mark their batch finished (one
  // more write per outcome), so every heartbeat found every row batch its
  // worker had claimed in the ring slot more than a reclaim window ago,
  // locked it and looked for a running row: a walk, and a row lock written
  // per batch, that grew for as long as the slot stays current. The first
  // look now marks such a batch finished, and no later one sees it.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto store = make_store(db, "w1");
  for (int i = 0; i < 3; ++i) {
    // Keyed: off the lanes, so each claim is a row batch.
    s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('keyed', 'k" + std::to_string(i) + "')");
    auto claimed = store.claim("default", 10).jobs;
    BOOST_REQUIRE(claimed.size() == 1u);
    store.finish({outcome(claimed, claimed[0].id, outcome_kind::completed)});
  }
  // A claim whose commit the worker never heard of: its row still runs.
  s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('keyed', 'in_doubt')");
  auto in_doubt = store.claim("default", 10).jobs;
  BOOST_REQUIRE(in_doubt.size() == 1u);
  s.exec("UPDATE job_batches SET claimed_at = now() - interval '1 hour'");
  const std::string open = "SELECT count(*) FROM job_batches WHERE worker = 'w1' "
                           "AND rescued_at IS NULL AND finished_at IS NULL";
  BOOST_TEST(s.scalar(open) == 4);
  store.heartbeat({});
  BOOST_TEST(s.scalar(open) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches WHERE NOT on_lane "
                      "AND finished_at IS NOT NULL AND rescued_at IS NULL") == 3);
  // The one in doubt was taken back, as before.
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches WHERE rescued_at IS NOT NULL "
                      "AND id = " + std::to_string(in_doubt[0].lease)) == 1);
}

BOOST_AUTO_TEST_CASE(a_queue_sample_reads_the_live_work_not_the_finished_lane) {
  // The leader samples every queue's depth for the metrics (every 15 s),
  // and the dashboard and `actor-worker queues` read the same statement.
  // Its lane part read every row of a lane from the start of the lane's
  // last tick, which stays where it is once that tick is used up: the
  // whole finished history of the slot (0.8 s at a million jobs). It now
  // reads the rest of the current tick past the position, and what the
  // tick's upper snapshot does not see.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto store = make_store(db, "w1");
  enqueue_n(db, 3000);
  claim_and_complete_all(store);
  s.exec("ANALYZE jobs_in");
  auto sample = [&](std::string* plan) {
    pqxx::work tx{s.conn};
    aw::storage::queue_samples_settings(tx);
    tx.exec0("PREPARE samples(double precision) AS " + statement_file("queue_samples"));
    if (plan)
      for (auto row : tx.exec("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE samples(120)"))
        *plan += row[0].as<std::string>() + "\n";
    int64_t available = 0;
    for (auto row : tx.exec("EXECUTE samples(120)"))
      if (row["state"].as<std::string>() == "available")
        available += row["jobs"].as<int64_t>();
    tx.exec0("DEALLOCATE samples");
    return available;
  };
  std::string plan;
  BOOST_TEST(sample(&plan) == 0);
  BOOST_TEST_INFO(plan);
  BOOST_TEST(!std::regex_search(plan, std::regex{R"(rows=[0-9]{4,})"}));
  BOOST_TEST(!std::regex_search(plan, std::regex{R"(Rows Removed by Filter: [0-9]{4,})"}));
  // A tick not used up yet: the sample counts what it has not handed out.
  enqueue_n(db, 10);
  BOOST_TEST(store.claim("default", 4).jobs.size() == 4u);
  BOOST_TEST(sample(nullptr) == 6);
  enqueue_n(db, 5);
  BOOST_TEST(sample(nullptr) == 11);
}

BOOST_AUTO_TEST_CASE(the_insert_trigger_reads_only_what_its_transaction_inserted) {
  // The insert trigger (actor_worker_jobs_inserted) has no transition
  // table: it finds the rows to move off the lanes by jobs_arrivals_idx and
  // the queues to wake by a probe of the lane index per lane. A probe
  // without the lane index's predicate in its condition cannot use it: the
  // trigger read the whole slot (150,000 rows) on every insert, a
  // transaction of 1,000 jobs took 33 ms instead of 8. Its plans read no
  // more than the rows of the insert, however many the slot holds.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  for (int t = 0; t < 5; ++t)
    s.exec("INSERT INTO jobs_in (kind) SELECT 'k' FROM generate_series(1, 2000)");
  s.exec("ANALYZE jobs_in");
  {
    plan_notices seen{s};
    for (int t = 0; t < 3; ++t)  // past the custom plans of the first calls
      s.exec("INSERT INTO jobs_in (kind) SELECT 'k' FROM generate_series(1, 10)");
    s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('keyed', 'x')");
    BOOST_TEST_INFO(seen.text);
    // (What the nodes read, not what the planner expected.)
    BOOST_TEST(!std::regex_search(seen.text, std::regex{R"(actual time=[0-9.]+ rows=[0-9]{4,})"}));
    BOOST_TEST(!std::regex_search(seen.text, std::regex{R"(Rows Removed by Filter: [0-9]{4,})"}));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE kind = 'keyed' AND ready_xid = '0'") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE ready_xid = '0'") == 1);
}

BOOST_AUTO_TEST_CASE(concurrent_claims_never_hand_out_a_job_twice) {
  aw::test::fresh_database db;
  std::atomic<bool> producing{true};
  std::vector<int64_t> produced;
  std::thread producer([&] {
    for (int i = 0; i < 40; ++i) {
      auto ids = enqueue_n(db, 100);
      produced.insert(produced.end(), ids.begin(), ids.end());
    }
    producing = false;
  });
  std::vector<std::vector<int64_t>> got(3);
  std::vector<std::thread> claimers;
  for (size_t c = 0; c < got.size(); ++c)
    claimers.emplace_back([&, c] {
      auto store = make_store(db, "w" + std::to_string(c));
      for (;;) {
        bool done = !producing;
        auto part = store.claim("default", 37).jobs;
        for (auto& j : part)
          got[c].push_back(j.id);
        if (done && part.empty())
          break;
      }
    });
  producer.join();
  for (auto& t : claimers)
    t.join();
  std::vector<int64_t> all;
  for (auto& g : got)
    all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  std::sort(produced.begin(), produced.end());
  BOOST_TEST(all.size() == produced.size());
  BOOST_TEST(all == produced, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(jobs_a_lane_cannot_hand_out_go_off_it_and_run_as_rows) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Plain SQL, as any language writes them: all land on the lane first.
  s.exec("INSERT INTO jobs_in (kind, state, run_at) VALUES "
         "('later', 'scheduled', now() + interval '1 hour')");
  s.exec("INSERT INTO jobs_in (kind, run_at) VALUES "
         "('not_due', now() + interval '1 hour')");
  s.exec("INSERT INTO jobs_in (kind, ordering_key) VALUES ('keyed', 'k'), ('keyed', 'k')");
  s.exec("INSERT INTO jobs_in (kind) VALUES ('plain')");
  auto store = make_store(db, "w1");
  auto claimed = store.claim("default", 10).jobs;
  std::multiset<std::string> kinds;
  for (auto& j : claimed)
    kinds.insert(j.kind);
  // The plain job from the lane; the first keyed job as a row (the second
  // waits for it); the others wait for their time.
  BOOST_TEST(kinds == (std::multiset<std::string>{"keyed", "plain"}),
             boost::test_tools::per_element());
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE ready_xid = '0'") == 4);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'later' "
                      "AND state = 'scheduled'") == 1);
  // Its row says 'available', but it waits for its run_at: `jobs` says so.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'not_due' "
                      "AND state = 'scheduled'") == 1);
  s.exec("UPDATE jobs_in SET run_at = now() WHERE kind IN ('later', 'not_due')");
  auto due = store.claim("default", 10).jobs;
  BOOST_TEST(due.size() == 2u);
  for (auto& j : due)
    BOOST_TEST(j.lease % 2 == 0); // row batches
}

BOOST_AUTO_TEST_CASE(a_failed_lane_job_becomes_a_row_that_counts_its_attempt) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 2);
  auto store = make_store(db, "w1");
  auto claimed = store.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 2u);
  auto failed = outcome(claimed, ids[0], outcome_kind::retry_after, "again");
  failed.delay_ms = 0;
  auto reports = store.finish({failed, outcome(claimed, ids[1], outcome_kind::completed)});
  BOOST_TEST((reports[0].result == aw::finish_result::applied));
  BOOST_TEST((reports[1].result == aw::finish_result::applied));
  aw::test::db_session s{db.url};
  BOOST_TEST(s.text("SELECT state || ' ' || attempt || ' ' || error_count "
                    "FROM jobs_live WHERE id = " + std::to_string(ids[0]))
             == "available 1 1"); // retried at once: due
  BOOST_TEST(state_of(s, ids[1]) == "completed");
  auto again = store.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(again.size(), 1u);
  BOOST_TEST(again[0].id == ids[0]);
  BOOST_TEST(again[0].attempt == 2);
  BOOST_TEST(again[0].error_count == 1);
}

BOOST_AUTO_TEST_CASE(an_outcome_under_a_lease_no_longer_ours_changes_nothing) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1");
  auto claimed = store.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  // w1 went silent an hour ago, after this claim; the leader's rescue
  // takes its batch back.
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
         "last_seen_at) VALUES ('w1', 'n', 'h', 1, 'v', now() - interval '1 hour')");
  s.exec("UPDATE job_batches SET claimed_at = now() - interval '61 minutes'");
  // Their handlers had started (a rescue charges only those).
  store.record_starts(held_of(claimed));
  auto rescuer = make_store(db, "w2");
  auto rescued = rescuer.rescue(100);
  BOOST_TEST(rescued.size() == 3u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled' "
                      "AND error_count = 1 AND attempt = 1") == 3);
  // Its late outcomes are stale: nothing is completed or retried twice.
  auto reports = store.finish({outcome(claimed, ids[0], outcome_kind::completed),
                               outcome(claimed, ids[1], outcome_kind::retryable_failure, "x")});
  BOOST_TEST((reports[0].result == aw::finish_result::stale));
  BOOST_TEST((reports[1].result == aw::finish_result::stale));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled' "
                      "AND error_count = 1") == 3);
  // The heartbeat of w1 tells it the lease is gone.
  BOOST_TEST(store.heartbeat({claimed[0].lease}).empty());
}

BOOST_AUTO_TEST_CASE(a_rescue_charges_only_the_jobs_whose_handler_started) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto lane = enqueue_n(db, 4);
  // Two jobs off the lanes (claimed as rows): inserted for later, now due.
  s.exec("INSERT INTO jobs_in (kind, run_at) SELECT 'noop', now() + interval '1 day' "
         "FROM generate_series(1, 2)");
  s.exec("UPDATE jobs_in SET run_at = now() WHERE run_at > now()");
  auto w1 = make_store(db, "w1");
  auto claimed = w1.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 6u);
  // w1 started one lane job and one row job, buffered the rest, and died.
  std::vector<aw::claimed_job> started;
  for (auto& j : claimed)
    if (j.id == lane[0] || j.id == claimed.back().id)
      started.push_back(j);
  BOOST_REQUIRE_EQUAL(started.size(), 2u);
  w1.record_starts(held_of(started));
  kill_worker(s, "w1");
  auto rescuer = make_store(db, "w0");
  auto rescued = rescuer.rescue(100);
  std::set<int64_t> charged;
  for (auto& r : rescued)
    charged.insert(r.id);
  BOOST_TEST(charged == (std::set<int64_t>{started[0].id, started[1].id}),
             boost::test_tools::per_element());
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled' "
                      "AND error_count = 1 AND attempt = 1") == 2);
  // The four never started are due again, uncharged, their start unknown.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE state = 'available' "
                      "AND attempt = 0 AND error_count = 0 AND start_unknown") == 4);
  // Their next claim records their start before any handler runs: when
  // that worker dies too, they are charged though it recorded nothing.
  auto w2 = make_store(db, "w2");
  auto again = w2.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(again.size(), 4u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE start_unknown") == 0);
  kill_worker(s, "w2");
  BOOST_TEST(rescuer.rescue(100).size() == 4u);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'scheduled' "
                      "AND error_count = 1 AND attempt = 1") == 6);
  // The start records of rescued claims are deleted by the cleanup.
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_starts") > 0);
  rescuer.delete_expired(1000);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_starts") == 0);
}

// What the ring still needs when it empties a slot is carried into the
// current slot, and judged again when that slot's turn comes: nothing is
// deleted row by row, so an open transaction leaves no dead index entry for
// a claim to walk (a soak's claims slowed on 200,000 of them).
BOOST_AUTO_TEST_CASE(what_the_ring_carries_forward_goes_with_the_slot_it_was_carried_into) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto slot = [&](int ahead) { return ring_slot(s, ahead); };
  auto current = slot(0);
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'noop', " + slot(1)
         + " FROM generate_series(1, 3)");
  // The worker keeps completed jobs (a retention of 0 would delete their
  // rows at once); the leader retains nothing.
  auto store = make_store(db, "w1");
  auto leader = make_store(db, "w0", 0ms);
  auto running = store.claim("default", 3).jobs;
  BOOST_REQUIRE_EQUAL(running.size(), 3u);
  s.exec("UPDATE job_batches SET slot = " + slot(1));
  // The ring empties the jobs' slot while they run: they and their batch
  // are carried into the current slot.
  leader.maintain_ring();
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + slot(1)) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + current) == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches_slot_" + current) == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running'") == 3);
  std::vector<aw::job_outcome> finishing;
  for (auto& j : running)
    finishing.push_back(outcome(j, outcome_kind::completed));
  for (auto& r : store.finish(finishing))
    BOOST_TEST((r.result == aw::finish_result::applied));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == 3);
  // A later claim moves the lane's position on.
  auto later = enqueue_n(db, 1);
  BOOST_REQUIRE_EQUAL(store.claim("default", 1).jobs.size(), 1u);
  // Time passes: the slot they were carried into comes due (stood in for
  // by moving its rows to the next slot to go).
  for (auto table : {"jobs_in", "job_batches", "batch_receipts"})
    s.exec(std::string{"UPDATE "} + table + " SET slot = " + slot(2));
  leader.maintain_ring();
  // The finished jobs and their batch went with it; the lane's position
  // and the running job stay.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'running' AND id = "
                      + std::to_string(later.at(0))) == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches") == 1);
  enqueue_n(db, 2);
  BOOST_TEST(store.claim("default", 10).jobs.size() == 2u);
}

// The slot's lock stops every claim while rows are carried: a round
// carries a bounded number, and a slot holding more (a backlog) is
// emptied over several rounds, losing nothing.
BOOST_AUTO_TEST_CASE(a_slot_holding_more_than_a_round_carries_is_emptied_over_several_rounds) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto old = ring_slot(s, 1);
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'noop', " + old
         + " FROM generate_series(1, 25)");
  auto leader = make_store(db, "w0", 0ms);
  BOOST_TEST(says(leader.maintain_ring(10), "carried 10 jobs of ring slot " + old));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + old) == 15);
  BOOST_TEST(says(leader.maintain_ring(10), "more next round"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + old) == 5);
  BOOST_TEST(says(leader.maintain_ring(10), "emptied ring slot " + old));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + old) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'") == 25);
  auto store = make_store(db, "w1");
  std::set<int64_t> claimed;
  for (auto& j : store.claim("default", 100).jobs)
    claimed.insert(j.id);
  BOOST_TEST(claimed.size() == 25u);
}

// A rescue took back a lane batch some of whose jobs had completed: those
// stay lane jobs, completed by their receipts. The ring's round carried
// the lane batches still open or finished within the retention, but not a
// rescued one: the completed jobs' rows went with their slot, gone from
// `jobs` within the retention (the SQL schedules' seed 147 of 2026-12-07,
// a `no_job_lost`).
BOOST_AUTO_TEST_CASE(completed_jobs_of_a_rescued_lane_batch_outlive_their_ring_slot) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // The leader keeps completed jobs an hour; its first round sets the
  // ring's period (a quarter of that), which moves the current slot.
  auto leader = make_store(db, "w0");
  leader.maintain_ring(10000);
  s.exec("UPDATE job_ring SET recycled_at = '{}'");
  auto old = ring_slot(s, 1);
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'noop', " + old
         + " FROM generate_series(1, 3)");
  auto store = make_store(db, "w1");
  auto claimed = store.claim("default", 3).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  auto done = store.finish({outcome(claimed[0], outcome_kind::completed)});
  BOOST_REQUIRE(done[0].result == aw::finish_result::applied);
  // w1 dies with the other two; the rescue takes its batch back.
  kill_worker(s, "w1");
  auto rescuer = make_store(db, "w2");
  rescuer.rescue(100);
  BOOST_REQUIRE_EQUAL(s.scalar("SELECT count(*) FROM job_batches WHERE rescued_at IS NOT NULL"), 1);
  BOOST_TEST(state_of(s, claimed[0].id) == "completed");
  BOOST_TEST(says(leader.maintain_ring(10000), "emptied ring slot " + old));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + old) == 0);
  // Completed a moment ago: kept for the retention, as every completed job.
  BOOST_TEST(state_of(s, claimed[0].id) == "completed");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 3);
}

BOOST_AUTO_TEST_CASE(the_ring_looks_for_lane_jobs_to_carry_only_past_each_lanes_position) {
  // The slot's lock stops every claim while the ring looks for what to
  // carry. Lane jobs not handed out were looked for from the lower
  // snapshot of the lane's position, which stays put once its tick is used
  // up: the lane's whole finished history in the slot was read under the
  // lock. Now: the rest of the current tick past the position, and what
  // its upper snapshot does not see.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto old = ring_slot(s, 1);
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'done', " + old
         + " FROM generate_series(1, 3000)");
  // The worker keeps completed jobs (a retention of 0 deletes their rows
  // at once); the ring's round below retains nothing.
  auto store = make_store(db, "w1");
  claim_and_complete_all(store);
  // One job not handed out yet, in the same slot: it is carried.
  s.exec("INSERT INTO jobs_in (kind, slot) VALUES ('waiting', " + old + ")");
  s.exec("ANALYZE jobs_in");
  std::string plans;
  {
    // The leader's round (job_store::maintain_ring), run in this session
    // to see its plans.
    plan_notices seen{s};
    auto done = s.text("SELECT actor_worker_recycle(interval '0', 10000)");
    BOOST_TEST(done.find("emptied ring slot " + old) != std::string::npos, done);
    plans = seen.text;
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + old) == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'") == 1);
  BOOST_TEST_INFO(plans);
  BOOST_TEST(!std::regex_search(plans, std::regex{R"(Rows Removed by Filter: [0-9]{4,})"}));
}

BOOST_AUTO_TEST_CASE(a_claim_its_live_worker_never_heard_of_is_taken_back_uncharged) {
  // A claim whose commit the worker never heard of (the connection broke
  // as it committed): the worker lives on and heartbeats, but does not
  // hold the claim. Its heartbeat takes it back once it is older than the
  // reclaim window; the rescue gives the jobs back, uncharged.
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto ids = enqueue_n(db, 3);
  auto store = make_store(db, "w1");
  auto in_doubt = store.claim("default", 2).jobs;
  auto held = store.claim("default", 1).jobs;
  BOOST_REQUIRE_EQUAL(in_doubt.size(), 2u);
  BOOST_REQUIRE_EQUAL(held.size(), 1u);
  s.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version) "
         "VALUES ('w1', 'n', 'h', 1, 'v')");
  // Younger than the window: left alone.
  store.heartbeat({held[0].lease});
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches WHERE rescued_at IS NOT NULL") == 0);
  s.exec("UPDATE job_batches SET claimed_at = now() - interval '121 seconds'");
  BOOST_TEST(store.heartbeat({held[0].lease}) == (std::vector<int64_t>{held[0].lease}),
             boost::test_tools::per_element());
  BOOST_TEST(s.scalar("SELECT count(*) FROM job_batches WHERE rescued_at IS NOT NULL") == 1);
  auto rescuer = make_store(db, "w0");
  BOOST_TEST(rescuer.rescue(100).empty()); // nothing charged
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                      "AND attempt = 0 AND error_count = 0") == 2);
  BOOST_TEST(state_of(s, held[0].id) == "running");
  BOOST_TEST(store.claim("default", 10).jobs.size() == 2u);
}

BOOST_AUTO_TEST_CASE(released_lane_jobs_come_back_first_and_uncharged) {
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 4);
  auto store = make_store(db, "w1");
  auto claimed = store.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 4u);
  BOOST_TEST(store.release(std::vector<aw::claimed_job>(claimed.begin() + 2,
                                                        claimed.end()),
                           false)
             == 2);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available' "
                      "AND attempt = 0 AND error_count = 0") == 2);
  auto newer = enqueue_n(db, 1);
  auto again = store.claim("default", 10).jobs;
  BOOST_TEST(ids_of(again) == (std::vector<int64_t>{ids[2], ids[3], newer[0]}),
             boost::test_tools::per_element());
  for (auto& j : again)
    BOOST_TEST(j.attempt == 1);
  // The heartbeat still holds the first two.
  auto alive = store.heartbeat({claimed[0].lease, claimed[1].lease});
  BOOST_TEST(alive == (std::vector<int64_t>{claimed[0].lease}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_claim_skips_a_lane_whose_lock_a_stuck_session_holds) {
  aw::test::fresh_database db;
  auto lane = enqueue_n(db, 3);
  auto rows = enqueue_n(db, 2);
  aw::test::db_session s{db.url};
  // Two jobs off the lane (as released or set-aside jobs are).
  s.exec("UPDATE jobs_in SET ready_xid = '0' WHERE id IN (" + std::to_string(rows[0])
         + ", " + std::to_string(rows[1]) + ")");
  // A session that took the lane's claim lock and went quiet, as an
  // operator's `jobs cancel` transaction left open would.
  pqxx::connection stuck_conn{db.url};
  pqxx::work stuck{stuck_conn};
  stuck.exec("SET application_name = 'stuck-session'");
  stuck.exec("SELECT pg_advisory_xact_lock(hashtext('default'), 0)");
  auto stuck_pid = stuck_conn.backendpid();

  auto store = make_store(db, "w1");
  auto began = std::chrono::steady_clock::now();
  auto skipped = store.claim("default", 10);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - began).count();
  auto wait = aw::defaults::claim_lock_wait.count();
  // The jobs off the lane still run; the lane waits for its lock, a
  // bounded time, and the claim says who holds it.
  BOOST_TEST(ids_of(skipped.jobs) == rows, boost::test_tools::per_element());
  BOOST_TEST(waited >= wait);
  BOOST_TEST(waited < wait + 5000);
  BOOST_REQUIRE_EQUAL(skipped.blocked_by.size(), 1u);
  BOOST_TEST_MESSAGE(skipped.blocked_by[0]);
  BOOST_TEST(skipped.blocked_by[0].rfind("priority 0, held by server pid "
                                        + std::to_string(stuck_pid) + " (", 0)
             == 0u);
  BOOST_TEST(aw::test::contains(skipped.blocked_by[0], "application stuck-session"));
  BOOST_TEST(aw::test::contains(skipped.blocked_by[0], "idle in transaction"));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'available'") == 3);

  // A holder that lets go within the wait is waited for: the lane's jobs
  // come in order, and nothing is said.
  std::thread let_go{[&] {
    std::this_thread::sleep_for(300ms);
    stuck.commit();
  }};
  auto taken = store.claim("default", 10);
  let_go.join();
  BOOST_TEST(ids_of(taken.jobs) == lane, boost::test_tools::per_element());
  BOOST_TEST(taken.blocked_by.empty());
}

BOOST_AUTO_TEST_CASE(a_claim_bounded_in_bytes_takes_a_prefix_and_at_least_one_job) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  s.exec("INSERT INTO jobs_in (kind, args) SELECT 'big', jsonb_build_object('x', "
         "repeat('a', 1000)) FROM generate_series(1, 5)");
  auto store = make_store(db, "w1");
  auto r = store.claim("default", 10, 2500);
  BOOST_TEST(r.jobs.size() == 2u);
  BOOST_TEST(r.byte_bound);
  auto one = store.claim("default", 10, 10);
  BOOST_TEST(one.jobs.size() == 1u);
  auto rest = store.claim("default", 10);
  BOOST_TEST(rest.jobs.size() == 2u);
}

BOOST_AUTO_TEST_CASE(the_ring_empties_a_slot_and_keeps_every_row_still_needed) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  // Rows of a slot that stopped being current long ago.
  auto old = ring_slot(s, 1);
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'done', " + old
         + " FROM generate_series(1, 20)");
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'running', " + old
         + " FROM generate_series(1, 3)");
  s.exec("INSERT INTO jobs_in (kind, slot) SELECT 'waiting', " + old
         + " FROM generate_series(1, 4)");
  s.exec("INSERT INTO jobs_in (kind, slot, state, run_at, ready_xid) VALUES "
         "('scheduled', " + old + ", 'scheduled', now() + interval '1 day', '0')");
  auto store = make_store(db, "w1", 0ms);
  auto done = store.claim("default", 20).jobs;
  BOOST_REQUIRE_EQUAL(done.size(), 20u);
  std::vector<aw::job_outcome> outcomes;
  for (auto& j : done)
    outcomes.push_back(outcome(j, outcome_kind::completed));
  store.finish(outcomes);
  auto running = store.claim("default", 3).jobs;
  BOOST_REQUIRE_EQUAL(running.size(), 3u);
  auto before = s.text("SELECT string_agg(id || ':' || state, ',' ORDER BY id) "
                       "FROM jobs_live WHERE kind <> 'done'");
  BOOST_TEST(says(store.maintain_ring(), "emptied ring slot " + old));
  // The completed jobs went with their slot; everything else is kept,
  // as it was.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE kind = 'done'") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_slot_" + old) == 0);
  BOOST_TEST(s.text("SELECT string_agg(id || ':' || state, ',' ORDER BY id) "
                    "FROM jobs_live WHERE kind <> 'done'") == before);
  // The kept jobs run on: the running ones complete, the waiting ones are
  // claimed.
  std::vector<aw::job_outcome> finishing;
  for (auto& j : running)
    finishing.push_back(outcome(j, outcome_kind::completed));
  for (auto& r : store.finish(finishing))
    BOOST_TEST((r.result == aw::finish_result::applied));
  BOOST_TEST(store.claim("default", 10).jobs.size() == 4u);
}

BOOST_AUTO_TEST_CASE(a_transactional_group_completes_lane_jobs_by_receipt_and_a_release_waits_for_it) {
  // A transactional group holds its lane jobs locked (advisory locks: their
  // rows are neither written nor row-locked), and completes them by a
  // receipt at its commit. A release of
  // the same job (shutdown, an executor giving up on the run) waits for
  // that commit and then finds the receipt: it moves nothing. (Read in one
  // statement, the release's receipt check used a snapshot from before its
  // wait and put the completed job back.)
  aw::test::fresh_database db;
  auto ids = enqueue_n(db, 3);
  auto storage = make_store(db, "w1");
  auto claimed = storage.claim("default", 10).jobs;
  BOOST_REQUIRE_EQUAL(claimed.size(), 3u);
  BOOST_REQUIRE(claimed.front().lease % 2 == 1); // a lane batch
  aw::test::db_session s{db.url};
  auto wal_before = s.text("SELECT pg_current_wal_insert_lsn()::text");
  std::promise<void> in_body;
  std::promise<void> go;
  auto go_on = go.get_future().share();
  aw::storage::transactional_body body = [&](pqxx::work&) {
    in_body.set_value();
    go_on.wait();
    return aw::job_outcome{};
  };
  aw::storage::transactional_run run;
  run.job = outcome(claimed.front(), outcome_kind::completed);
  run.job.job_kind = "noop";
  run.job.queue = "default";
  run.limit = 30s;
  run.body = &body;
  auto tx_store = make_store(db, "w1");
  std::thread group([&] { tx_store.transact({&run}, 200ms); });
  in_body.get_future().wait();
  // The job is running, its row untouched (still on its lane, not even
  // row-locked: a row lock would dirty its page and cost WAL).
  BOOST_TEST(state_of(s, claimed.front().id) == "running");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE ready_xid = '0'") == 0);
  BOOST_TEST(s.scalar("SELECT xmax::text::bigint FROM jobs_in WHERE id = "
                      + std::to_string(claimed.front().id))
             == 0);
  auto released = std::async(std::launch::async, [&] {
    return storage.release(std::vector<aw::claimed_job>{claimed.front()}, true);
  });
  BOOST_TEST((released.wait_for(500ms) == std::future_status::timeout));
  go.set_value();
  group.join();
  BOOST_TEST((run.result.record == aw::outcome_record::committed));
  BOOST_TEST((run.result.kind == outcome_kind::completed));
  BOOST_TEST(released.get() == 0);
  BOOST_TEST(state_of(s, claimed.front().id) == "completed");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE ready_xid = '0'") == 0);
  // The other two finish the usual way; nothing ran twice.
  std::vector<aw::job_outcome> rest;
  for (size_t i = 1; i < claimed.size(); ++i)
    rest.push_back(outcome(claimed[i], outcome_kind::completed));
  for (auto& r : storage.finish(rest))
    BOOST_TEST((r.result == aw::finish_result::applied));
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 3);
  BOOST_TEST_MESSAGE("WAL of the run: "
                     << s.scalar("SELECT pg_current_wal_insert_lsn() - '"
                                 + wal_before + "'::pg_lsn")
                     << " B");
}

BOOST_AUTO_TEST_SUITE_END()
