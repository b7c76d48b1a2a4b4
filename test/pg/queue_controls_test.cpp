// Cluster-wide queue controls against a real database (migrations/013):
// a paused queue claims nothing and says so, a resume claims again, the
// configured limits are written at start (the last node started wins, the
// pause untouched), global_concurrency holds under concurrent claimers,
// rate_limit holds over its window, and `actor-worker queues` lists, pauses
// and resumes (an unknown queue: exit 1, nothing changed).

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/admin_queues.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"

using namespace std::chrono_literals;
using aw::storage::job_store;

namespace {

job_store make_store(const aw::test::fresh_database& db,
                     const std::string& worker_id,
                     std::vector<aw::storage::queue_limit_settings> limits = {}) {
  aw::storage::job_store_options opts;
  opts.url = db.url;
  opts.worker_id = worker_id;
  opts.completed_retention = 1h;
  opts.queue_limits = std::move(limits);
  return job_store{opts};
}

/// Enqueues `n` due lane jobs in `queue`.
void enqueue_n(const aw::test::fresh_database& db, int n,
               const std::string& queue) {
  std::vector<aw::enqueue_request> requests(static_cast<size_t>(n));
  for (auto& r : requests) {
    r.kind = "noop";
    r.options.queue = queue;
  }
  auto conn = db.connect();
  pqxx::work tx{*conn};
  aw::enqueue_many(tx, requests);
  tx.commit();
}

/// Enqueues `n` row-per-state jobs (due a moment ago, so not on a lane).
void enqueue_rows(const aw::test::fresh_database& db, int n,
                  const std::string& queue) {
  db.exec("INSERT INTO jobs_in (kind, queue, run_at) SELECT 'noop', '" + queue
          + "', now() - interval '1 second' FROM generate_series(1, "
          + std::to_string(n) + ")");
}

void pause(const aw::test::fresh_database& db, const std::string& queue,
           bool paused) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  if (paused)
    aw::storage::pause_queue(tx, queue);
  else
    aw::storage::resume_queue(tx, queue);
  tx.commit();
}

void complete_all(job_store& store, const std::vector<aw::claimed_job>& jobs) {
  std::vector<aw::job_outcome> outcomes;
  for (auto& j : jobs)
    outcomes.push_back(aw::test::outcome(j, aw::outcome_kind::completed));
  if (!outcomes.empty())
    store.finish(outcomes);
}

/// Jobs of `queue` the database counts as held (what global_concurrency
/// bounds): a limited queue's jobs are claimed as rows, running until
/// their outcome commits.
const char* const held_sql =
  "SELECT count(*) FROM jobs WHERE state = 'running' AND queue = 'q'";

} // namespace

BOOST_AUTO_TEST_SUITE(queue_controls_test)

BOOST_AUTO_TEST_CASE(a_paused_queue_claims_nothing_until_resumed) {
  aw::test::fresh_database db;
  enqueue_n(db, 5, "q");
  enqueue_rows(db, 2, "q");
  enqueue_n(db, 3, "other");
  pause(db, "q", true);
  auto store = make_store(db, "w1");
  auto r = store.claim("q", 100);
  BOOST_TEST(r.jobs.empty());
  BOOST_TEST(r.paused);
  // A claim of no jobs still reports the pause (the poller's probe).
  BOOST_TEST(store.claim("q", 0).paused);
  // Other queues are not affected.
  auto other = store.claim("other", 100);
  BOOST_TEST(other.jobs.size() == 3u);
  BOOST_TEST(!other.paused);
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = 'q' "
                       "AND paused AND paused_at IS NOT NULL") == 1);

  pause(db, "q", false);
  BOOST_TEST(!store.claim("q", 0).paused);
  auto resumed = store.claim("q", 100);
  BOOST_TEST(resumed.jobs.size() == 7u);
  BOOST_TEST(!resumed.paused);
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = 'q' "
                       "AND NOT paused AND paused_at IS NULL") == 1);
}

BOOST_AUTO_TEST_CASE(a_worker_start_writes_its_limits_and_leaves_the_pause) {
  aw::test::fresh_database db;
  pause(db, "q", true);
  auto a = make_store(db, "a", {{"q", 3, 10, 1000}, {"plain", 0, 0, 0}});
  BOOST_TEST(a.apply_queue_controls().size() == 2u); // q's limits changed
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = 'q' "
                       "AND paused AND global_concurrency = 3 AND rate_limit "
                       "= 10 AND rate_period = interval '1 second'") == 1);
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = "
                       "'plain' AND global_concurrency IS NULL AND "
                       "rate_limit IS NULL AND NOT paused") == 1);
  // The same file again: nothing to report.
  BOOST_TEST(a.apply_queue_controls().empty());
  // Another node's file disagrees: the last started wins, and says so.
  auto b = make_store(db, "b", {{"q", 5, 0, 0}});
  auto changes = b.apply_queue_controls();
  BOOST_REQUIRE(changes.size() == 2u);
  BOOST_TEST(changes[0] == "queue q: global_concurrency 3 -> 5");
  BOOST_TEST(changes[1] == "queue q: rate_limit 10/s -> none");
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = 'q' "
                       "AND paused AND global_concurrency = 5 AND rate_limit "
                       "IS NULL AND rate_period IS NULL") == 1);
}

BOOST_AUTO_TEST_CASE(global_concurrency_is_never_exceeded_by_concurrent_claimers) {
  aw::test::fresh_database db;
  constexpr int limit = 7;
  constexpr int total = 400;
  enqueue_n(db, total - 40, "q");
  enqueue_rows(db, 40, "q"); // the row-per-state path counts too
  make_store(db, "setup", {{"q", limit, 0, 0}}).apply_queue_controls();

  std::atomic<int> held{0};
  std::atomic<int> max_held{0};
  std::atomic<int> done{0};
  std::atomic<bool> stop{false};
  std::atomic<int> limited_claims{0};
  // The database's own count, sampled in single snapshots while the
  // claimers run.
  int64_t max_db_held = 0;
  std::thread monitor([&] {
    pqxx::connection c{db.url};
    while (!stop) {
      pqxx::read_transaction tx{c};
      max_db_held = std::max(max_db_held, tx.exec1(held_sql)[0].as<int64_t>());
    }
  });
  std::vector<std::thread> claimers;
  for (int w = 0; w < 4; ++w)
    claimers.emplace_back([&, w] {
      auto store = make_store(db, "w" + std::to_string(w));
      auto give_up = std::chrono::steady_clock::now() + 60s;
      while (done < total && std::chrono::steady_clock::now() < give_up) {
        auto r = store.claim("q", 5);
        if (r.limited)
          ++limited_claims;
        int n = static_cast<int>(r.jobs.size());
        // Counted from after the claim committed to before the finish is
        // sent: inside the span the database counts the jobs as held.
        int now = held += n;
        int seen = max_held;
        while (now > seen && !max_held.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(2ms); // the "handler"
        held -= n;
        complete_all(store, r.jobs);
        done += n;
        if (n == 0)
          std::this_thread::sleep_for(1ms);
      }
    });
  for (auto& t : claimers)
    t.join();
  stop = true;
  monitor.join();
  BOOST_TEST(done.load() == total);
  BOOST_TEST(max_held.load() <= limit);
  BOOST_TEST(max_db_held <= limit);
  // The limit was reached and bound: the claimers pressed against it.
  BOOST_TEST(max_db_held >= 1);
  BOOST_TEST(limited_claims.load() > 0);
  BOOST_TEST(db.scalar(held_sql) == 0);
}

BOOST_AUTO_TEST_CASE(rate_limit_per_minute_admits_exactly_n_in_the_window) {
  aw::test::fresh_database db;
  enqueue_n(db, 100, "q");
  make_store(db, "setup", {{"q", 0, 25, 60'000}}).apply_queue_controls();
  std::atomic<int> claimed{0};
  std::atomic<int64_t> retry_after{-1};
  std::vector<std::thread> claimers;
  for (int w = 0; w < 3; ++w)
    claimers.emplace_back([&, w] {
      auto store = make_store(db, "w" + std::to_string(w));
      auto until = std::chrono::steady_clock::now() + 1500ms;
      while (std::chrono::steady_clock::now() < until) {
        auto r = store.claim("q", 4);
        claimed += static_cast<int>(r.jobs.size());
        complete_all(store, r.jobs);
        if (r.limited && r.jobs.empty())
          retry_after = r.retry_after_ms;
        std::this_thread::sleep_for(5ms);
      }
    });
  for (auto& t : claimers)
    t.join();
  // All within one minute: exactly the limit, never more.
  BOOST_TEST(claimed.load() == 25);
  BOOST_TEST(db.scalar("SELECT sum(jobs) FROM queue_starts WHERE queue = 'q'")
             == 25);
  // A claim refused by the rate says when the window frees a start.
  BOOST_TEST(retry_after.load() > 55'000);
  BOOST_TEST(retry_after.load() <= 60'000);
}

BOOST_AUTO_TEST_CASE(rate_limit_per_second_holds_over_a_longer_run) {
  aw::test::fresh_database db;
  enqueue_n(db, 400, "q");
  make_store(db, "setup", {{"q", 0, 20, 1000}}).apply_queue_controls();
  std::atomic<int> claimed{0};
  std::vector<std::thread> claimers;
  auto start = std::chrono::steady_clock::now();
  for (int w = 0; w < 3; ++w)
    claimers.emplace_back([&, w] {
      auto store = make_store(db, "w" + std::to_string(w));
      while (std::chrono::steady_clock::now() < start + 2500ms) {
        auto r = store.claim("q", 6);
        claimed += static_cast<int>(r.jobs.size());
        complete_all(store, r.jobs);
        std::this_thread::sleep_for(3ms);
      }
    });
  for (auto& t : claimers)
    t.join();
  auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                               - start)
                   .count();
  // Every claim happened within `elapsed` seconds: a sliding window of one
  // second admits at most 20 per started second of it.
  auto bound = 20 * static_cast<int>(std::ceil(elapsed));
  BOOST_TEST(claimed.load() <= bound, claimed.load() << " > " << bound);
  BOOST_TEST(claimed.load() >= 20); // the first window at least
  // Within any one-second window of the recorded starts, at most 20.
  BOOST_TEST(db.scalar("SELECT coalesce(max(w), 0) FROM (SELECT sum(jobs) "
                       "OVER (ORDER BY started_at RANGE BETWEEN interval "
                       "'999 milliseconds' PRECEDING AND CURRENT ROW) AS w "
                       "FROM queue_starts WHERE queue = 'q') AS x")
             <= 20);
}

BOOST_AUTO_TEST_CASE(queues_cli_lists_pauses_resumes_and_refuses_unknown_queues) {
  aw::test::fresh_database db;
  enqueue_n(db, 4, "mail");
  enqueue_rows(db, 1, "mail");
  auto store = make_store(db, "w1", {{"mail", 2, 0, 0}});
  store.apply_queue_controls();
  store.claim("mail", 1);

  auto listed = aw::test::run_binary("queues --json", db.url);
  BOOST_TEST_REQUIRE(listed.exit_code == 0, listed.err);
  auto rows = nlohmann::json::parse(listed.out);
  nlohmann::json mail;
  for (auto& q : rows)
    if (q["queue"] == "mail")
      mail = q;
  BOOST_REQUIRE(mail.is_object());
  BOOST_TEST(mail["available"].get<int>() == 4);
  BOOST_TEST(mail["running"].get<int>() == 1);
  BOOST_TEST(mail["running_by_node"]["w1"].get<int>() == 1);
  BOOST_TEST(mail["paused"].get<bool>() == false);
  BOOST_TEST(mail["global_concurrency"].get<int>() == 2);
  BOOST_TEST(mail["rate_limit"].is_null());
  BOOST_TEST(mail["oldest_available_age_seconds"].get<double>() >= 0.0);
  // No live worker_nodes row serves mail: every available job waits.
  BOOST_TEST(mail["unserved"].get<int>() == 4);

  auto paused = aw::test::run_binary("queues pause mail", db.url);
  BOOST_TEST(paused.exit_code == 0, paused.err);
  BOOST_TEST(aw::test::contains(paused.out, "queue mail paused"), paused.out);
  BOOST_TEST(store.claim("mail", 10).paused);
  auto text = aw::test::run_binary("queues", db.url);
  BOOST_TEST(text.exit_code == 0, text.err);
  BOOST_TEST(aw::test::contains(text.out, "mail  PAUSED since"), text.out);
  BOOST_TEST(aw::test::contains(text.out, "  unserved 4  "), text.out);

  auto unknown = aw::test::run_binary("queues pause nosuchqueue", db.url);
  BOOST_TEST(unknown.exit_code == 1);
  BOOST_TEST(aw::test::contains(unknown.err, "unknown queue 'nosuchqueue'"),
             unknown.err);
  BOOST_TEST(db.scalar("SELECT count(*) FROM queue_controls WHERE queue = "
                       "'nosuchqueue'") == 0);
  auto unknown_resume = aw::test::run_binary("queues resume nosuchqueue", db.url);
  BOOST_TEST(unknown_resume.exit_code == 1);

  auto resumed = aw::test::run_binary("queues resume mail", db.url);
  BOOST_TEST(resumed.exit_code == 0, resumed.err);
  BOOST_TEST(aw::test::contains(resumed.out, "queue mail resumed"), resumed.out);
  BOOST_TEST(!store.claim("mail", 0).paused);
}

BOOST_AUTO_TEST_CASE(check_shows_the_limits_each_node_would_write) {
  auto path = "/tmp/aw_queue_controls_check_" + std::to_string(::getpid())
              + ".toml";
  {
    std::ofstream out{path};
    out << "[queues.mail]\nconcurrency = 2\nglobal_concurrency = 3\n"
           "rate_limit = \"10/s\"\n[queues.reports]\nrate_limit = \"5/m\"\n"
           "[nodes.a]\nqueues = [\"mail\", \"reports\"]\n";
  }
  auto checked = aw::test::run_binary("check --config " + path, "");
  auto as_json = aw::test::run_binary("check --json --config " + path, "");
  std::remove(path.c_str());
  BOOST_TEST(checked.exit_code == 0, checked.err);
  BOOST_TEST(aw::test::contains(checked.out,
                                "mail (concurrency 2, global_concurrency 3, "
                                "rate_limit 10/s), reports (concurrency 10, "
                                "rate_limit 5/m)"),
             checked.out);
  auto doc = nlohmann::json::parse(as_json.out);
  BOOST_TEST(aw::test::contains(doc.dump(), "{\"concurrency\":10,\"name\":"
                                            "\"reports\",\"rate_limit\":\"5/m\"}"),
             doc.dump());
  BOOST_TEST(aw::test::contains(doc.dump(), "\"global_concurrency\":3"),
             doc.dump());
}

BOOST_AUTO_TEST_SUITE_END()
