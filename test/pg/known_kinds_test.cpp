// A worker claims only the kinds it runs (migrations/008_known_kinds.sql):
// jobs of other kinds wait, visible and unharmed, for a worker that runs
// them, whether they sit on a lane or on the row-per-state path. Against a
// real database, through job_store and through running nodes.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/app/builtin_kinds.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "log_capture.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"

using namespace std::chrono_literals;
using aw::storage::job_store;

namespace {

constexpr auto patience = std::chrono::seconds{60};

/// Enqueues `n` due jobs of `kind` in one transaction (one lane key).
std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db, int n,
                               const std::string& kind,
                               const aw::insert_options& opts = {}) {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests) {
    r.kind = kind;
    r.options = opts;
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

std::unique_ptr<job_store> serving(const aw::test::fresh_database& db,
                                   const std::vector<std::string>& kinds) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "known-kinds-test";
  opts.completed_retention = 1h;
  auto store = std::make_unique<job_store>(opts);
  store->serve(kinds);
  return store;
}

/// One claim of up to `want` jobs.
aw::claim_result claim_all(job_store& store, size_t want) {
  return store.claim("default", static_cast<int>(want), int64_t{1} << 30, 0);
}

std::shared_ptr<aw::registry> builtin_registry() {
  auto reg = std::make_shared<aw::registry>();
  aw::register_builtin_kinds(*reg);
  return reg;
}

} // namespace

BOOST_AUTO_TEST_SUITE(known_kinds_test)

BOOST_AUTO_TEST_CASE(lane_claim_sets_aside_other_kinds_and_goes_on_past_them) {
  aw::test::fresh_database db;
  // 300 jobs of a kind this worker lacks come first on the lane, then 20 it
  // runs: one claim of 50 passes the 300 (setting them aside) and takes the
  // 20.
  auto others = enqueue_n(db, 300, "new_kind");
  auto mine = enqueue_n(db, 20, "noop");
  auto store = serving(db, {"noop"});
  auto claimed = claim_all(*store, 20);
  BOOST_TEST(claimed.jobs.size() == 20u);
  for (auto& j : claimed.jobs)
    BOOST_TEST(j.kind == "noop");
  BOOST_REQUIRE(claimed.set_aside.size() == 1u);
  BOOST_TEST(claimed.set_aside.front().kind == "new_kind");
  BOOST_TEST(claimed.set_aside.front().count == 300);
  aw::test::db_session s{db.url};
  // Untouched but for their lane: available, due, no attempt charged.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'new_kind' "
                      "AND state = 'available' AND attempt = 0 "
                      "AND run_at <= now()")
             == 300);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_in WHERE kind = 'new_kind' "
                      "AND ready_xid <> '0'")
             == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'noop' "
                      "AND state = 'running'")
             == 20);
  // A second claim of this worker finds nothing and sets nothing aside.
  auto again = store->claim("default", 50, int64_t{1} << 30, 0);
  BOOST_TEST(again.jobs.empty());
  BOOST_TEST(again.set_aside.empty());
  // A worker that runs the kind takes them, set aside or not.
  auto other_store = serving(db, {"new_kind", "noop"});
  auto theirs = claim_all(*other_store, 300);
  BOOST_TEST(theirs.jobs.size() == 300u);
  BOOST_TEST(theirs.set_aside.empty());
}

BOOST_AUTO_TEST_CASE(a_transaction_left_open_holds_neither_jobs_nor_their_set_aside_back) {
  aw::test::fresh_database db;
  // A transaction with an id stays open, the cluster's oldest.
  auto idle = db.connect();
  pqxx::work idle_tx{*idle};
  idle_tx.exec("SELECT pg_current_xact_id()");
  enqueue_n(db, 30, "new_kind");
  enqueue_n(db, 5, "noop");
  // One claim takes this worker's jobs and sets the others aside.
  auto store = serving(db, {"noop"});
  auto claimed = store->claim("default", 50, int64_t{1} << 30, 0);
  idle_tx.abort();
  BOOST_TEST(claimed.jobs.size() == 5u);
  BOOST_REQUIRE(claimed.set_aside.size() == 1u);
  BOOST_TEST(claimed.set_aside.front().kind == "new_kind");
  BOOST_TEST(claimed.set_aside.front().count == 30);
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'new_kind' "
                      "AND state = 'available' AND attempt = 0")
             == 30);
}

BOOST_AUTO_TEST_CASE(row_per_state_jobs_of_other_kinds_are_not_claimed) {
  aw::test::fresh_database db;
  // Ordering keys keep jobs off the lanes.
  aw::insert_options keyed;
  keyed.ordering_key = "k1";
  enqueue_n(db, 1, "new_kind", keyed);
  aw::insert_options other_key;
  other_key.ordering_key = "k2";
  enqueue_n(db, 1, "noop", other_key);
  auto store = serving(db, {"noop"});
  auto claimed = claim_all(*store, 1);
  BOOST_REQUIRE(claimed.jobs.size() == 1u);
  BOOST_TEST(claimed.jobs.front().kind == "noop");
  aw::test::db_session s{db.url};
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'new_kind' "
                      "AND state = 'available' AND attempt = 0")
             == 1);
}

BOOST_AUTO_TEST_CASE(a_store_told_no_kinds_claims_every_kind) {
  aw::test::fresh_database db;
  enqueue_n(db, 3, "anything");
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "all-kinds";
  job_store store{opts};
  BOOST_TEST(claim_all(store, 3).jobs.size() == 3u);
}

BOOST_AUTO_TEST_CASE(queue_samples_count_due_jobs_no_live_node_runs_as_unserved) {
  aw::test::fresh_database db;
  // default: 3 lane jobs of a kind a live node runs, 2 of a kind none runs,
  // and off the lanes one more of it due and one not due yet (scheduled,
  // not counted). mail: 4 jobs nobody serves at all.
  enqueue_n(db, 3, "served");
  enqueue_n(db, 2, "bogus");
  db.exec("INSERT INTO jobs_in (kind, run_at) VALUES "
          "('bogus', now() - interval '1 second'), "
          "('bogus', now() + interval '1 hour')");
  aw::insert_options mail;
  mail.queue = "mail";
  enqueue_n(db, 4, "anything", mail);
  // The live node registers the kinds it runs with its row; a node that
  // left and one not seen for the reclaim window ran `bogus`: neither
  // serves.
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = "live:1";
  opts.node = "live";
  opts.queues = {"default"};
  opts.completed_retention = 1h;
  job_store node{opts};
  node.serve({"served"});
  node.refresh_node(0, false);
  BOOST_TEST(db.scalar("SELECT count(*) FROM worker_nodes WHERE worker_id = "
                       "'live:1' AND kinds = '{served}'")
             == 1);
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds, left_at) VALUES ('gone:1', 'gone', 'h', 1, 'v', "
          "'{default,mail}', '{bogus,anything}', now())");
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds, last_seen_at) VALUES ('stale:1', 'stale', 'h', 1, "
          "'v', '{default,mail}', '{bogus,anything}', now() - interval '1 day')");
  auto by_queue = [&] {
    std::map<std::string, aw::queue_sample> out;
    for (auto& q : node.sample_queues())
      out[q.queue] = q;
    return out;
  };
  auto s = by_queue();
  BOOST_TEST(s["default"].available == 6);
  BOOST_TEST(s["default"].unserved == 3);
  BOOST_TEST(s["mail"].available == 4);
  BOOST_TEST(s["mail"].unserved == 4);
  // Jobs the live node's claim set aside are off their lane now: still
  // counted, once.
  auto claimed = node.claim("default", 10, int64_t{1} << 30, 0);
  BOOST_TEST(claimed.jobs.size() == 3u);
  s = by_queue();
  BOOST_TEST(s["default"].available == 3);
  BOOST_TEST(s["default"].unserved == 3);
  // A node registering no kind list (kinds NULL) runs every kind of its
  // queues.
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues) VALUES ('all:1', 'all', 'h', 1, 'v', '{mail}')");
  s = by_queue();
  BOOST_TEST(s["mail"].unserved == 0);
  BOOST_TEST(s["default"].unserved == 3);
  // Once a live node runs `bogus` in default, nothing there is unserved.
  db.exec("INSERT INTO worker_nodes (worker_id, node, host, pid, version, "
          "queues, kinds) VALUES ('new:1', 'new', 'h', 1, 'v', '{default}', "
          "'{bogus}')");
  s = by_queue();
  BOOST_TEST(s["default"].unserved == 0);
  BOOST_TEST(s["default"].available == 3);
}

BOOST_AUTO_TEST_CASE(rolling_deploy_an_old_node_leaves_new_kinds_to_a_new_one) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto cfg = db.config();
  cfg.worker.poll_interval = 200ms;
  std::vector<int64_t> new_jobs;
  {
    aw::test::log_capture log;
    aw::test::worker_node old_node{cfg, builtin_registry()};
    new_jobs = enqueue_n(db, 50, "added_in_v2");
    enqueue_n(db, 50, "noop");
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'noop' "
                        "AND state = 'completed'")
               == 50;
      },
      patience));
    // The new kind's jobs wait: nothing dead-lettered, nothing charged.
    BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = "
                        "'added_in_v2' AND state = 'available' "
                        "AND attempt = 0")
               == 50);
    BOOST_TEST(log.has("job(s) of kind 'added_in_v2' left available"));
  }
  // The new version's node runs them.
  auto v2 = builtin_registry();
  v2->add_raw(
    "added_in_v2", [](const nlohmann::json&, const aw::job_context&) {},
    aw::handler_mode::non_blocking);
  aw::test::worker_node new_node{cfg, v2};
  BOOST_TEST(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'added_in_v2' "
                      "AND state = 'completed' AND attempt = 1")
             == 50;
    },
    patience));
}

BOOST_AUTO_TEST_SUITE_END()
