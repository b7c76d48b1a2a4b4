// Unique jobs and ordering keys against a real database: concurrent
// producers of one unique job, the unique variants (by queue, per period,
// by state), and ordering keys under several executors and nodes.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/job_store.hpp"
#include "worker_node.hpp"
#include "lifecycle_helpers.hpp"

using namespace std::chrono_literals;
using aw::test::job_where;
using aw::test::script;
using aw::test::step;

namespace {

constexpr auto patience = std::chrono::seconds{60};

aw::insert_options unique_opts(aw::unique_options u = {}) {
  aw::insert_options o;
  o.unique = std::move(u);
  return o;
}

} // namespace

BOOST_AUTO_TEST_SUITE(unique_ordering_test)

BOOST_AUTO_TEST_CASE(ten_concurrent_producers_of_one_unique_job_insert_one_row_and_all_get_its_id) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  const int producers = 10;
  for (int round = 0; round < 3; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      std::mutex mtx;
      std::condition_variable cv;
      int ready = 0;
      std::vector<int64_t> ids(producers, 0);
      std::vector<std::string> errors;
      std::vector<std::thread> threads;
      nlohmann::json args = {{"report", "daily"}, {"round", round}};
      for (int i = 0; i < producers; ++i)
        threads.emplace_back([&, i] {
          try {
            pqxx::connection conn{db.url};
            pqxx::work tx{conn};
            tx.exec("SELECT 1"); // the transaction is open
            {
              std::unique_lock<std::mutex> guard{mtx};
              ++ready;
              cv.notify_all();
              cv.wait(guard, [&] { return ready == producers; });
            }
            ids[i] = aw::enqueue(tx, "report", args, unique_opts());
            // Hold the transaction a moment: the others' inserts queue up
            // behind the first uncommitted one.
            std::this_thread::sleep_for(50ms);
            tx.commit();
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> guard{mtx};
            errors.push_back(e.what());
          }
        });
      for (auto& t : threads)
        t.join();
      for (auto& e : errors)
        BOOST_ERROR("producer failed: " << e);
      BOOST_TEST(errors.empty());
      BOOST_TEST(ids[0] > 0);
      for (int i = 1; i < producers; ++i)
        BOOST_TEST(ids[i] == ids[0], "producer " << i << " got " << ids[i]
                                                 << ", producer 0 got " << ids[0]);
      BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'report' "
                          "AND (args->>'round')::int = "
                          + std::to_string(round))
                 == 1);
    }
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live") == 3);
}

BOOST_AUTO_TEST_CASE(unique_key_is_kind_and_canonical_args_and_by_queue_adds_the_queue) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto conn = db.connect();
  auto enqueue = [&](const std::string& kind, const nlohmann::json& args,
                     const std::string& queue, bool by_queue) {
    aw::unique_options u;
    u.by_queue = by_queue;
    auto o = unique_opts(u);
    o.queue = queue;
    pqxx::work tx{*conn};
    auto id = aw::enqueue(tx, kind, args, o);
    tx.commit();
    return id;
  };
  // Without by_queue: the queue is not part of the key.
  auto a = enqueue("sync", {{"account", 1}, {"full", true}}, "a", false);
  BOOST_TEST(enqueue("sync", {{"account", 1}, {"full", true}}, "b", false) == a);
  // Key order does not matter (jsonb is canonical); values and kind do.
  BOOST_TEST(enqueue("sync", {{"full", true}, {"account", 1}}, "a", false) == a);
  auto other_args = enqueue("sync", {{"account", 2}, {"full", true}}, "a", false);
  auto other_kind = enqueue("resync", {{"account", 1}, {"full", true}}, "a", false);
  BOOST_TEST(other_args != a);
  BOOST_TEST(other_kind != a);
  BOOST_TEST(s.text("SELECT queue" + job_where(a)) == "a");
  // With by_queue: one per queue.
  auto qa = enqueue("export", {{"day", 1}}, "a", true);
  auto qb = enqueue("export", {{"day", 1}}, "b", true);
  BOOST_TEST(qa != qb);
  BOOST_TEST(enqueue("export", {{"day", 1}}, "a", true) == qa);
  BOOST_TEST(enqueue("export", {{"day", 1}}, "b", true) == qb);
  BOOST_TEST(s.text("SELECT queue" + job_where(qb)) == "b");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'sync'") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'export'") == 2);
}

BOOST_AUTO_TEST_CASE(unique_period_holds_within_a_time_bucket_and_not_across_buckets) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto conn = db.connect();
  // Within one transaction now() is fixed: one bucket for sure.
  aw::unique_options hourly;
  hourly.period = 1h;
  {
    pqxx::work tx{*conn};
    auto first = aw::enqueue(tx, "digest", {{"user", 1}}, unique_opts(hourly));
    auto again = aw::enqueue(tx, "digest", {{"user", 1}}, unique_opts(hourly));
    BOOST_TEST(again == first);
    tx.commit();
  }
  // A short period: the next bucket admits a new job.
  aw::unique_options short_period;
  short_period.period = 400ms;
  auto bucket = [&] {
    return s.scalar("SELECT floor(extract(epoch FROM now()) * 1000 / 400)::bigint");
  };
  int64_t first, first_bucket;
  {
    pqxx::work tx{*conn};
    first = aw::enqueue(tx, "ping", {{"host", "db1"}}, unique_opts(short_period));
    first_bucket = tx.exec1("SELECT floor(extract(epoch FROM now()) * 1000 / 400)::bigint")[0]
                     .as<int64_t>();
    tx.commit();
  }
  BOOST_REQUIRE(aw::test::wait_until([&] { return bucket() > first_bucket; }, 10s));
  {
    pqxx::work tx{*conn};
    auto second = aw::enqueue(tx, "ping", {{"host", "db1"}}, unique_opts(short_period));
    auto again = aw::enqueue(tx, "ping", {{"host", "db1"}}, unique_opts(short_period));
    BOOST_TEST(second != first);
    BOOST_TEST(again == second);
    tx.commit();
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'ping'") == 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'digest'") == 1);
}

BOOST_AUTO_TEST_CASE(unique_job_stops_blocking_once_it_leaves_its_unique_states) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  aw::storage::job_store_options so;
  so.url = db.url;
  so.worker_id = "w1";
  so.completed_retention = 24h; // keep completed rows
  aw::storage::job_store store{so};
  auto conn = db.connect();
  auto enqueue = [&](const nlohmann::json& args, const aw::unique_options& u) {
    pqxx::work tx{*conn};
    auto id = aw::enqueue(tx, "import", args, unique_opts(u));
    tx.commit();
    return id;
  };
  auto run = [&](int64_t id, aw::outcome_kind kind) {
    auto claimed = store.claim("default", 10).jobs;
    BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
    BOOST_REQUIRE_EQUAL(claimed[0].id, id);
    auto reports = store.finish({aw::test::outcome(claimed, id, kind, "done")});
    BOOST_REQUIRE((reports.at(0).result == aw::finish_result::applied));
  };

  // Unique only while not finished: completed does not block.
  aw::unique_options active;
  active.states = {"scheduled", "available", "running"};
  auto a1 = enqueue({{"file", "a.csv"}}, active);
  BOOST_TEST(enqueue({{"file", "a.csv"}}, active) == a1); // available blocks
  {
    auto claimed = store.claim("default", 10).jobs;
    BOOST_REQUIRE_EQUAL(claimed.size(), 1u);
    BOOST_TEST(enqueue({{"file", "a.csv"}}, active) == a1); // running blocks
    store.finish({aw::test::outcome(claimed, a1, aw::outcome_kind::completed)});
  }
  BOOST_TEST(s.text("SELECT state" + job_where(a1)) == "completed");
  auto a2 = enqueue({{"file", "a.csv"}}, active);
  BOOST_TEST(a2 != a1);
  BOOST_TEST(s.text("SELECT state" + job_where(a2)) == "available");
  run(a2, aw::outcome_kind::completed);

  // The default states include completed: a completed job still blocks.
  aw::unique_options defaults;
  auto b1 = enqueue({{"file", "b.csv"}}, defaults);
  run(b1, aw::outcome_kind::completed);
  BOOST_TEST(enqueue({{"file", "b.csv"}}, defaults) == b1);

  // ... but a cancelled job does not, and a dead-lettered one has left.
  auto c1 = enqueue({{"file", "c.csv"}}, defaults);
  run(c1, aw::outcome_kind::cancelled);
  auto c2 = enqueue({{"file", "c.csv"}}, defaults);
  BOOST_TEST(c2 != c1);
  run(c2, aw::outcome_kind::terminal_failure);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE original_job_id = "
                      + std::to_string(c2))
             == 1);
  auto c3 = enqueue({{"file", "c.csv"}}, defaults);
  BOOST_TEST(c3 != c2);
  BOOST_TEST(c3 != c1);
  // With cancelled among the states, a cancelled job blocks.
  aw::unique_options with_cancelled;
  with_cancelled.states = {"available", "running", "cancelled"};
  auto d1 = enqueue({{"file", "d.csv"}}, with_cancelled);
  auto claimed = store.claim("default", 10).jobs; // also claims c3
  store.finish({aw::test::outcome(claimed, d1, aw::outcome_kind::cancelled)});
  BOOST_TEST(s.text("SELECT state" + job_where(d1)) == "cancelled");
  BOOST_TEST(enqueue({{"file", "d.csv"}}, with_cancelled) == d1);
}

BOOST_AUTO_TEST_CASE(cli_enqueue_unique_prints_the_existing_id_and_stores_the_ordering_key) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  auto enqueue = [&](const std::string& args) {
    auto r = aw::test::run_binary("enqueue " + args, db.url);
    BOOST_TEST_MESSAGE("enqueue " << args << ": exit " << r.exit_code << ", out "
                                  << r.out << ", err " << r.err);
    BOOST_REQUIRE_EQUAL(r.exit_code, 0);
    return std::stoll(r.out);
  };
  auto first = enqueue("report '{\"day\": 1}' --unique");
  BOOST_TEST(enqueue("report '{\"day\": 1}' --unique") == first);
  auto other = enqueue("report '{\"day\": 2}' --unique");
  BOOST_TEST(other != first);
  // Without --unique a duplicate is a new job.
  BOOST_TEST(enqueue("report '{\"day\": 1}'") != first);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'report'") == 3);
  auto keyed = enqueue("step '{}' --ordering-key acct-9");
  BOOST_TEST(s.text("SELECT ordering_key" + job_where(keyed)) == "acct-9");
  BOOST_TEST(s.check("SELECT ordering_key IS NULL AND unique_key IS NOT NULL"
                     + job_where(first)));
}

namespace {

/// When each run started and ended, per job, across every node.
struct run_log {
  struct run {
    int64_t id;
    std::string key;
    int attempt;
    std::chrono::steady_clock::time_point start, end;
  };

  std::mutex mtx;
  std::vector<run> runs;

  void add(run r) {
    std::lock_guard<std::mutex> guard{mtx};
    runs.push_back(std::move(r));
  }

  std::vector<run> snapshot() {
    std::lock_guard<std::mutex> guard{mtx};
    return runs;
  }
};

/// A registry whose `ordered` kind runs the job's script, recording the run.
std::shared_ptr<aw::registry> ordered_registry(run_log& log) {
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("ordered", [&log](const nlohmann::json& args,
                                 const aw::job_context& ctx) {
    auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds{args.value("ms", 3)});
    auto record = [&] {
      log.add({ctx.id, args.value("key", std::string{}), ctx.attempt, start,
               std::chrono::steady_clock::now()});
    };
    try {
      auto result = aw::test::scripted(args, ctx);
      record();
      return result;
    } catch (...) {
      record(); // a failed run is a run too
      throw;
    }
  });
  return reg;
}

aw::runtime_config fast_poll(aw::runtime_config cfg, const std::string& node) {
  cfg.worker.node = node;
  // An ordered job waits for its predecessor's commit and the next poll.
  cfg.worker.poll_interval = 20ms;
  cfg.validate();
  return cfg;
}

} // namespace

BOOST_AUTO_TEST_CASE(ordering_key_jobs_never_overlap_and_run_in_enqueue_order_across_nodes) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  run_log log;
  const int n = 100;
  std::vector<aw::enqueue_request> requests;
  for (int i = 0; i < n; ++i) {
    aw::enqueue_request r{"ordered", {{"key", "account-7"}, {"seq", i}}, {}};
    r.options.ordering_key = "account-7";
    requests.push_back(r);
  }
  std::vector<int64_t> ids;
  {
    // 8 executors: two nodes of four.
    aw::test::worker_node n1{fast_poll(db.config(4), "n1"), ordered_registry(log)};
    aw::test::worker_node n2{fast_poll(db.config(4), "n2"), ordered_registry(log)};
    ids = aw::test::enqueue_all(db, requests);
    BOOST_REQUIRE_MESSAGE(
      aw::test::wait_until(
        [&] {
          return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == n;
        },
        patience),
      s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") << " of " << n
                                                                      << " completed");
  }
  auto runs = log.snapshot();
  BOOST_REQUIRE_EQUAL(runs.size(), static_cast<size_t>(n));
  std::sort(runs.begin(), runs.end(),
            [](auto& a, auto& b) { return a.start < b.start; });
  int overlaps = 0, out_of_order = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    BOOST_TEST(runs[i].attempt == 1);
    if (runs[i].id != ids[i])
      ++out_of_order;
    if (i > 0 && runs[i].start < runs[i - 1].end)
      ++overlaps;
  }
  BOOST_TEST(overlaps == 0);
  BOOST_TEST(out_of_order == 0);
  // Usually both nodes took part (not asserted: which node's poll comes
  // first after each commit is up to timer phases).
  BOOST_TEST_MESSAGE("jobs per node: "
                     << s.text("SELECT string_agg(node || ' ' || c, ', ') FROM ("
                               "SELECT split_part(locked_by, ':', 1) AS node, "
                               "count(*) AS c FROM jobs_live GROUP BY 1) AS x"));
}

BOOST_AUTO_TEST_CASE(finishing_an_ordered_job_wakes_the_next_without_waiting_for_the_idle_poll) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  run_log log;
  const int n = 20;
  std::vector<aw::enqueue_request> requests;
  for (int i = 0; i < n; ++i) {
    aw::enqueue_request r{"ordered", {{"key", "chain"}, {"seq", i}}, {}};
    r.options.ordering_key = "chain";
    requests.push_back(r);
  }
  // Idle polls every 30 s: a chain that waited for them would take 10 min.
  auto cfg = db.config(4);
  cfg.worker.poll_interval = 30s;
  aw::test::worker_node node{cfg, ordered_registry(log)};
  auto start = std::chrono::steady_clock::now();
  aw::test::enqueue_all(db, requests);
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == n;
    },
    60s));
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST((took < 30s), "the chain of " << n << " took "
                           << std::chrono::duration_cast<std::chrono::seconds>(took).count()
                           << " s");
}

BOOST_AUTO_TEST_CASE(ordering_key_job_waits_while_an_earlier_one_is_retried_or_until_it_is_dead_lettered) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  run_log log;
  auto keyed = [](const std::string& key, nlohmann::json args,
                  std::optional<int> max_attempts = std::nullopt) {
    args["key"] = key;
    aw::enqueue_request r{"ordered", args, {}};
    r.options.ordering_key = key;
    r.options.max_attempts = max_attempts;
    return r;
  };
  auto ids = aw::test::enqueue_all(
    db, {
          // Retried once after 300 ms, then completes; the next one waits.
          keyed("k1", script({step("retry_after", 300), step("complete")})),
          keyed("k1", script({step("complete")})),
          // Dead-lettered at once; the next one then runs.
          keyed("k2", script({step("terminal", 0, "bad input")}), 1),
          keyed("k2", script({step("complete")})),
        });
  {
    aw::test::worker_node node{fast_poll(db.config(8), "n1"), ordered_registry(log)};
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'") == 3;
      },
      patience));
  }
  auto runs = log.snapshot();
  auto runs_of = [&](int64_t id) {
    std::vector<run_log::run> out;
    for (auto& r : runs)
      if (r.id == id)
        out.push_back(r);
    std::sort(out.begin(), out.end(),
              [](auto& a, auto& b) { return a.attempt < b.attempt; });
    return out;
  };
  auto first = runs_of(ids[0]);
  auto second = runs_of(ids[1]);
  BOOST_REQUIRE_EQUAL(first.size(), 2u);
  BOOST_REQUIRE_EQUAL(second.size(), 1u);
  // Not between the retry and the rerun: after the earlier job completed.
  BOOST_TEST((second[0].start >= first[1].end));
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs WHERE original_job_id = "
                      + std::to_string(ids[2]))
             == 1);
  auto dead = runs_of(ids[2]);
  auto after_dead = runs_of(ids[3]);
  BOOST_REQUIRE_EQUAL(dead.size(), 1u);
  BOOST_REQUIRE_EQUAL(after_dead.size(), 1u);
  BOOST_TEST((after_dead[0].start >= dead[0].end));
  BOOST_TEST(s.text("SELECT state" + job_where(ids[3])) == "completed");
}

BOOST_AUTO_TEST_CASE(jobs_of_different_ordering_keys_run_in_parallel) {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  const int keys = 4, per_key = 3;
  std::mutex mtx;
  std::condition_variable cv;
  int running = 0, max_running = 0, timeouts = 0;
  std::map<std::string, int> running_per_key, max_per_key;
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("keyed", [&](const nlohmann::json& args, const aw::job_context&) {
    auto key = args.at("key").get<std::string>();
    std::unique_lock<std::mutex> guard{mtx};
    ++running;
    max_running = std::max(max_running, running);
    max_per_key[key] = std::max(max_per_key[key], ++running_per_key[key]);
    cv.notify_all();
    // The first job of every key meets the others here: only possible when
    // jobs of different keys run at the same time.
    if (!cv.wait_for(guard, 10s, [&] { return max_running >= keys; }))
      ++timeouts;
    guard.unlock();
    std::this_thread::sleep_for(10ms);
    guard.lock();
    --running;
    --running_per_key[key];
  });
  std::vector<aw::enqueue_request> requests;
  for (int j = 0; j < per_key; ++j)
    for (int k = 0; k < keys; ++k) {
      aw::enqueue_request r{"keyed", {{"key", "k" + std::to_string(k)}}, {}};
      r.options.ordering_key = "k" + std::to_string(k);
      requests.push_back(r);
    }
  {
    aw::test::worker_node node{fast_poll(db.config(8), "n1"), std::move(reg)};
    aw::test::enqueue_all(db, requests);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = 'completed'")
               == keys * per_key;
      },
      patience));
  }
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_TEST(timeouts == 0);
  BOOST_TEST(max_running == keys);
  for (auto& [key, max] : max_per_key)
    BOOST_TEST(max == 1, "key " << key << " ran " << max << " at once");
  BOOST_TEST(max_per_key.size() == static_cast<size_t>(keys));
}

BOOST_AUTO_TEST_SUITE_END()
