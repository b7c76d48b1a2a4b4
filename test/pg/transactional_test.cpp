// Transactional handlers (registry::add_transactional) against a real
// database: the handler's writes, the job's outcome and its follow-ups
// commit in one transaction or not at all; a failure rolls the writes back
// and is recorded the usual way; a run that is no longer the worker's
// rolls back and records nothing (stale_run); the transaction ends at its
// limit; and a COMMIT cut off by pg_terminate_backend is resolved by
// reading, so each job's effect exists exactly when the job completed.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "log_capture.hpp"
#include "pg_fixture.hpp"
#include "pg_helpers.hpp"
#include "worker_node.hpp"
#include "lifecycle_helpers.hpp"

using namespace std::chrono_literals;

namespace {

constexpr auto patience = std::chrono::seconds{60};

using json = nlohmann::json;

/// The handlers' effect: one row per committed run.
void create_effects(aw::test::fresh_database& db) {
  db.exec("CREATE TABLE effects (job_id bigint NOT NULL, attempt int NOT NULL, "
          "note text, tx bigint NOT NULL DEFAULT txid_current())");
}

/// Inserts the run's effect in `tx`.
void write_effect(pqxx::work& tx, const aw::job_context& ctx,
                  const std::string& note = "") {
  tx.exec_params("INSERT INTO effects (job_id, attempt, note) "
                 "VALUES ($1, $2, $3)",
                 ctx.id, ctx.attempt, note);
}

/// `n` jobs of `kind` with args {"i": i}.
std::vector<int64_t> enqueue_n(const aw::test::fresh_database& db,
                               const std::string& kind, int n,
                               const json& extra = json::object()) {
  std::vector<aw::enqueue_request> requests;
  for (int i = 0; i < n; ++i) {
    auto args = extra;
    args["i"] = i;
    requests.push_back({kind, args, {}});
  }
  return aw::test::enqueue_all(db, requests);
}

/// `cfg` with queue `default` running transactional runs in groups of up
/// to `group`, on `pool` connections (fewer than the concurrency, so runs
/// wait for them and go together).
aw::runtime_config grouped(aw::runtime_config cfg, int group, int pool) {
  for (auto& q : cfg.queues)
    q.transactional_group = group;
  cfg.database.transactional_pool_size = pool;
  return cfg;
}

/// How many transactions committed the effects (each row names its
/// top-level transaction; a savepoint's rows have an xmin of their own):
/// fewer than the effects when runs shared commits.
int64_t effect_commits(aw::test::db_session& s) {
  return s.scalar("SELECT count(DISTINCT tx) FROM effects");
}

/// A fresh database with the effects table, a session on it, a registry.
struct tx_fixture {
  aw::test::fresh_database db;
  aw::test::db_session s{db.url};
  std::shared_ptr<aw::registry> reg = std::make_shared<aw::registry>();

  tx_fixture() {
    create_effects(db);
  }

  /// Runs `n` jobs of `kind` on a worker with `cfg` until all completed.
  void drain(const aw::runtime_config& cfg, const std::string& kind, int n) {
    aw::test::worker_node node{cfg, reg};
    enqueue_n(db, kind, n);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
               == n;
      },
      patience));
  }

  /// Waits until `n` jobs completed on `node`, running each retry at once
  /// (their backoff moved to now, the worker woken) instead of waiting it out.
  void complete_with_retries(aw::test::worker_node& node, int n) {
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        s.exec("UPDATE jobs_in SET run_at = now() WHERE state = 'scheduled'");
        node.rt().wake();
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
               == n;
      },
      patience));
  }

  /// Runs one job of `kind` on a worker with `cfg` until its first attempt
  /// failed; returns that attempt's error message.
  std::string first_failure(const aw::runtime_config& cfg,
                            const std::string& kind) {
    {
      aw::test::worker_node node{cfg, reg};
      enqueue_n(db, kind, 1);
      BOOST_REQUIRE(aw::test::wait_until(
        [&] {
          return s.scalar("SELECT count(*) FROM jobs_live WHERE error_count "
                          "= 1")
                 == 1;
        },
        patience));
    }
    return s.text("SELECT last_error_message FROM jobs_live");
  }

  /// Registers `long`: a transactional kind whose statement sleeps 20 s
  /// after writing its effect, until a cancel request stops it.
  void add_long_sleeper() {
    reg->add_transactional<json>(
      "long", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
        write_effect(tx, ctx);
        tx.exec("SELECT pg_sleep(20)");
      });
  }

  /// How many of `long`'s statements are sleeping now.
  int64_t sleeping_statements() {
    return s.scalar("SELECT count(*) FROM pg_stat_activity WHERE "
                    "datname = current_database() AND query = "
                    "'SELECT pg_sleep(20)'");
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(transactional_test, tx_fixture)

BOOST_AUTO_TEST_CASE(a_handlers_writes_commit_with_its_completion) {
  reg->add_transactional<json>(
    "pay", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx, std::to_string(args.at("i").get<int>()));
    });
  const int n = 300;
  {
    aw::test::worker_node node{db.config(10), reg};
    enqueue_n(db, "pay", n);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                        "'completed'")
               == n;
      },
      patience));
  }
  // Exactly one effect per job, of its one run.
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
  BOOST_TEST(s.scalar("SELECT count(DISTINCT job_id) FROM effects") == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects AS e JOIN jobs_live AS j "
                      "ON j.id = e.job_id AND j.state = 'completed' "
                      "AND j.attempt = e.attempt AND j.args->>'i' = e.note")
             == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM dead_letter_jobs") == 0);
}

BOOST_AUTO_TEST_CASE(a_throw_rolls_the_writes_back_and_the_failure_is_recorded) {
  reg->add_transactional<json>(
    "flaky", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
      if (ctx.attempt == 1)
        throw std::runtime_error("the bank said no");
      if (ctx.attempt == 2)
        throw aw::terminal_error("the card is gone for good");
    });
  auto cfg = db.config(4);
  {
    aw::test::worker_node node{cfg, reg};
    auto ids = enqueue_n(db, "flaky", 1);
    // The retry comes after its backoff (2 s): run it at once.
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE error_count = 1 "
                        "AND state = 'scheduled'")
               == 1;
      },
      patience));
    BOOST_TEST(s.text("SELECT last_error_message FROM jobs_live")
               == "the bank said no");
    s.exec("UPDATE jobs_in SET run_at = now()");
    node.rt().wake();
    BOOST_REQUIRE(aw::test::wait_until(
      [&] { return s.scalar("SELECT count(*) FROM dead_letter_jobs") == 1; },
      patience));
  }
  // Neither run's write committed.
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 0);
  BOOST_TEST(s.text("SELECT last_error_message FROM dead_letter_jobs")
             == "the card is gone for good");
}

BOOST_AUTO_TEST_CASE(every_outcome_commits_with_the_writes_and_its_follow_ups) {
  reg->add_transactional<json>(
    "order", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      auto what = args.at("outcome").get<std::string>();
      write_effect(tx, ctx, what);
      if (what == "retry")
        return aw::outcome::retry_after(1h, "the warehouse is closed");
      if (what == "snooze")
        return aw::outcome::snooze(1h);
      if (what == "cancel")
        return aw::outcome::cancel("the customer changed their mind");
      if (what == "wait")
        return aw::outcome::wait_for_callback(1h);
      return aw::outcome::completed();
    });
  reg->add_raw("receipt", [](const json&, const aw::job_context&) {});
  // A follow-up of each completion goes to a queue nobody serves here.
  reg->on_completed_enqueue<json>(
    "order", [](const json& args, const json& job) {
      aw::enqueue_request r;
      r.kind = "receipt";
      r.args = {{"order", job.at("id")}, {"i", args.at("i")}};
      r.options.queue = "receipts";
      return r;
    });
  std::vector<aw::enqueue_request> requests;
  for (const char* what : {"complete", "retry", "snooze", "cancel", "wait"})
    requests.push_back({"order", json{{"outcome", what}, {"i", 0}}, {}});
  {
    aw::test::worker_node node{db.config(4), reg};
    aw::test::enqueue_all(db, requests);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] { return s.scalar("SELECT count(*) FROM effects") == 5; },
      patience));
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'order' "
                        "AND state = 'running'")
               == 0;
      },
      patience));
  }
  auto state_of = [&](const std::string& what) {
    return s.text("SELECT j.state || ':' || j.error_count FROM jobs_live AS j "
                  "JOIN effects AS e ON e.job_id = j.id WHERE e.note = '"
                  + what + "'");
  };
  BOOST_TEST(state_of("complete") == "completed:0");
  BOOST_TEST(state_of("retry") == "scheduled:1");
  BOOST_TEST(state_of("snooze") == "scheduled:0");
  BOOST_TEST(state_of("cancel") == "cancelled:0");
  BOOST_TEST(state_of("wait") == "waiting_external:0");
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'order' "
                      "AND state = 'waiting_external' AND callback_id IS NOT NULL")
             == 1);
  // The completion's follow-up, and only that one.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'receipt' "
                      "AND (args->>'order')::bigint = (SELECT job_id FROM "
                      "effects WHERE note = 'complete')")
             == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE kind = 'receipt'")
             == 1);
}

BOOST_AUTO_TEST_CASE(a_follow_up_that_throws_rolls_the_writes_back) {
  reg->add_transactional<json>(
    "order", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
    });
  reg->on_completed_enqueue<json>(
    "order", [](const json&, const json&) -> std::optional<aw::enqueue_request> {
      throw std::runtime_error("the receipt printer is on fire");
    });
  auto error = first_failure(db.config(2), "order");
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 0);
  BOOST_TEST(aw::test::contains(error, "the receipt printer is on fire"),
             error);
}

BOOST_AUTO_TEST_CASE(the_part_before_runs_outside_the_transaction) {
  std::atomic<int> open_during_before{-1};
  auto url = db.url;
  reg->add_transactional<json>(
    "ship",
    [&open_during_before, url](const json& args, const aw::job_context&) {
      // The slow external call: no transactional run's transaction of
      // this worker is open (its last statement took the leases; other
      // sessions, such as the storage actor's, may be between statements).
      aw::test::db_session probe{url};
      open_during_before = static_cast<int>(probe.scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
        "current_database() AND state LIKE 'idle in transaction%' "
        "AND query LIKE '%transactional group%'"));
      return "tracking-" + std::to_string(args.at("i").get<int>());
    },
    [](const json&, const aw::job_context& ctx, std::string& tracking,
       pqxx::work& tx) { write_effect(tx, ctx, tracking); });
  reg->add_transactional<json>(
    "refused", [](const json&, const aw::job_context&) {
      throw std::runtime_error("the carrier refused the parcel");
    },
    [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx, "never");
    });
  {
    aw::test::worker_node node{db.config(2), reg};
    enqueue_n(db, "ship", 1);
    enqueue_n(db, "refused", 1);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                        "'completed' OR error_count = 1")
               == 2;
      },
      patience));
  }
  BOOST_TEST(open_during_before.load() == 0);
  BOOST_TEST(s.text("SELECT note FROM effects") == "tracking-0");
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 1);
  BOOST_TEST(s.text("SELECT last_error_message FROM jobs_live WHERE kind = "
                    "'refused'")
             == "the carrier refused the parcel");
}

BOOST_AUTO_TEST_CASE(a_run_no_longer_the_workers_rolls_back_and_records_nothing) {
  std::atomic<int> bodies{0};
  auto url = db.url;
  reg->add_transactional<json>(
    "late",
    [url](const json&, const aw::job_context& ctx) {
      // Meanwhile its claim is taken back, as a rescue would.
      aw::test::db_session other{url};
      other.exec("UPDATE job_batches SET rescued_at = now() "
                 "WHERE rescued_at IS NULL");
      static_cast<void>(ctx);
    },
    [&bodies](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      ++bodies;
      write_effect(tx, ctx);
    });
  aw::test::log_capture logs;
  {
    aw::test::worker_node node{db.config(2), reg};
    enqueue_n(db, "late", 1);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] { return logs.has("stale_run"); }, patience));
  }
  BOOST_TEST(bodies.load() == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                      "'completed'")
             == 0);
}

BOOST_AUTO_TEST_CASE(a_rescue_passes_by_a_claim_a_transaction_holds) {
  // While a run's transaction is open, its worker looks gone to a rescue
  // (in the rescuer's own transaction, rolled back after): the rescue
  // passes the claim by at once, without waiting for the run, and the run
  // then commits its effect and completion once.
  reg->add_transactional<json>(
    "held", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
      tx.exec("SELECT pg_sleep(3)");
    });
  {
    aw::test::worker_node node{db.config(2), reg};
    enqueue_n(db, "held", 1);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND query = 'SELECT pg_sleep(3)'")
               == 1;
      },
      patience));
    aw::test::db_session rescuer{db.url};
    rescuer.exec("BEGIN");
    rescuer.exec("UPDATE worker_nodes SET last_seen_at = now() - interval '1 hour'");
    rescuer.exec("UPDATE job_batches SET claimed_at = now() - interval '1 hour'");
    auto started = std::chrono::steady_clock::now();
    BOOST_TEST(rescuer.scalar("SELECT count(*) FROM actor_worker_rescue(60, 3, 100)")
               == 0);
    BOOST_TEST((std::chrono::steady_clock::now() - started < 2s));
    BOOST_TEST(rescuer.scalar("SELECT count(*) FROM job_batches "
                              "WHERE rescued_at IS NOT NULL")
               == 0);
    rescuer.exec("ROLLBACK");
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'") == 1;
      },
      patience));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE error_count > 0") == 0);
}

BOOST_AUTO_TEST_CASE(the_transaction_ends_at_its_limit) {
  reg->add_transactional<json>(
    "slow", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
      if (ctx.attempt == 1)
        tx.exec("SELECT pg_sleep(5)");
    });
  auto cfg = db.config(2);
  cfg.database.transaction_timeout = 500ms;
  auto error = first_failure(cfg, "slow");
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 0);
  BOOST_TEST(aw::test::contains(error, "statement timeout"), error);
}

BOOST_AUTO_TEST_CASE(a_cancel_request_stops_the_running_statement_and_rolls_back) {
  add_long_sleeper();
  {
    aw::test::worker_node node{db.config(2), reg};
    auto id = enqueue_n(db, "long", 1).front();
    BOOST_REQUIRE(aw::test::wait_until([&] { return sleeping_statements() == 1; },
                                       patience));
    auto started = std::chrono::steady_clock::now();
    auto r = aw::test::run_binary("jobs cancel " + std::to_string(id), db.url);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                        "'cancelled'")
               == 1;
      },
      patience));
    // Well before the statement's 20 s: it was cancelled, not waited for.
    BOOST_TEST((std::chrono::steady_clock::now() - started < 10s));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 0);
}

BOOST_AUTO_TEST_CASE(a_cancel_request_stops_a_run_waiting_for_a_connection) {
  // The only connection of the pool is held by a statement that sleeps; a
  // run waiting for it is woken by its cancellation, not by the connection.
  add_long_sleeper();
  reg->add_transactional<json>(
    "short", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
    });
  {
    aw::test::worker_node node{grouped(db.config(2), 1, 1), reg};
    auto holder = enqueue_n(db, "long", 1).front();
    BOOST_REQUIRE(aw::test::wait_until([&] { return sleeping_statements() == 1; },
                                       patience));
    auto waiter = enqueue_n(db, "short", 1).front();
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'")
               == 2;
      },
      patience));
    auto started = std::chrono::steady_clock::now();
    auto r = aw::test::run_binary("jobs cancel " + std::to_string(waiter), db.url);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'cancelled' "
                        "AND id = " + std::to_string(waiter))
               == 1;
      },
      patience));
    BOOST_TEST((std::chrono::steady_clock::now() - started < 10s));
    // The holder still sleeps on the connection the waiter never got.
    BOOST_TEST(sleeping_statements() == 1);
    r = aw::test::run_binary("jobs cancel " + std::to_string(holder), db.url);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'cancelled'")
               == 2;
      },
      patience));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == 0);
}

BOOST_AUTO_TEST_CASE(a_commit_cut_off_is_resolved_by_reading) {
  // Every COMMIT of a handler's transaction pauses in a deferred trigger;
  // a killer terminates the server process of every other one it sees
  // there. Each terminated COMMIT must not count: its job runs again, and
  // in the end every job completed with exactly one effect.
  db.exec("CREATE FUNCTION pause_commit() RETURNS trigger LANGUAGE plpgsql "
          "AS $$ BEGIN PERFORM pg_sleep(0.05); RETURN NULL; END $$");
  db.exec("CREATE CONSTRAINT TRIGGER pause_commit AFTER INSERT ON effects "
          "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
          "EXECUTE FUNCTION pause_commit()");
  reg->add_transactional<json>(
    "pay", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
    });
  const int n = 60;
  std::atomic<bool> stop{false};
  std::atomic<int> terminated{0};
  std::thread killer{[&] {
    aw::test::db_session k{db.url};
    std::set<std::string> seen; // COMMITs by pid and transaction start
    while (!stop) {
      auto r = k.query("SELECT pid, pid || '@' || xact_start FROM "
                       "pg_stat_activity WHERE datname = current_database() "
                       "AND query = 'COMMIT' AND state = 'active' AND "
                       "wait_event = 'PgSleep'");
      for (const auto& row : r)
        if (seen.insert(row[1].as<std::string>()).second
            && seen.size() % 2 == 1) {
          k.query("SELECT pg_terminate_backend("
                  + std::to_string(row[0].as<int>()) + ")");
          ++terminated;
        }
      std::this_thread::sleep_for(5ms);
    }
  }};
  aw::test::thread_joiner join_killer{stop, killer};
  {
    auto cfg = db.config(4);
    cfg.worker.max_retries = 100;
    aw::test::worker_node node{cfg, reg};
    enqueue_n(db, "pay", n);
    // Failed runs come back after their backoff: pull them forward.
    auto all_done = aw::test::wait_until(
      [&] {
        s.exec("UPDATE jobs_in SET run_at = now() WHERE state = 'scheduled' "
               "AND run_at > now()");
        node.rt().wake();
        return s.scalar("SELECT count(*) FROM jobs_live WHERE state = "
                        "'completed'")
               == n;
      },
      patience);
    if (!all_done)
      for (const auto& row : s.query(
             "SELECT id, state, attempt, error_count, run_at, "
             "last_error_message FROM jobs_live WHERE state <> 'completed'"))
        BOOST_TEST_MESSAGE("not completed: " << row[0].c_str() << " "
                           << row[1].c_str() << " attempt " << row[2].c_str()
                           << " errors " << row[3].c_str() << " run_at "
                           << row[4].c_str() << ": " << row[5].c_str());
    BOOST_REQUIRE(all_done);
    stop = true;
  }
  BOOST_TEST_MESSAGE(terminated.load() << " COMMITs terminated");
  BOOST_TEST(terminated.load() > 0);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
  BOOST_TEST(s.scalar("SELECT count(DISTINCT job_id) FROM effects") == n);
  // Each effect is of the run that completed the job.
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects AS e JOIN jobs_live AS j "
                      "ON j.id = e.job_id AND j.attempt = e.attempt")
             == n);
}

BOOST_AUTO_TEST_CASE(runs_of_a_group_share_one_commit) {
  reg->add_transactional<json>(
    "pay", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx, std::to_string(args.at("i").get<int>()));
    });
  const int n = 400;
  drain(grouped(db.config(32), 16, 2), "pay", n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects AS e JOIN jobs AS j "
                      "ON j.id = e.job_id AND j.state = 'completed' "
                      "AND j.attempt = e.attempt AND j.args->>'i' = e.note")
             == n);
  // Each effect committed with its job's completion, and runs shared
  // those commits: the completions are rows of the same transactions.
  auto commits = effect_commits(s);
  BOOST_TEST_MESSAGE(n << " runs in " << commits << " commits");
  BOOST_TEST(commits < n / 2);
}

BOOST_AUTO_TEST_CASE(runs_waiting_for_their_transaction_hold_no_thread) {
  // One connection, and its run's handler holds it: the other 39 runs
  // wait for it. A run waits in the pool's queue, not on a thread of its
  // own (each blocked thread cost a wake-up per run, which was most of the
  // worker's CPU). Then all 40 commit.
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  reg->add_transactional<json>(
    "hold", [&](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
      ++started;
      while (!release)
        std::this_thread::sleep_for(5ms);
    });
  auto threads = [] {
    return std::distance(std::filesystem::directory_iterator{"/proc/self/task"},
                         std::filesystem::directory_iterator{});
  };
  const int n = 40;
  aw::test::worker_node node{grouped(db.config(n), 1, 1), reg};
  auto before = threads();
  enqueue_n(db, "hold", n);
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return started == 1
             && s.scalar("SELECT count(*) FROM jobs WHERE state = 'running'")
                  == n;
    },
    patience));
  std::this_thread::sleep_for(300ms); // the executors start what they hold
  auto during = threads();
  BOOST_TEST_MESSAGE(n << " runs, one of them running: " << before
                       << " threads before, " << during << " now");
  BOOST_TEST(during - before < 10);
  BOOST_TEST(started == 1);
  release = true;
  BOOST_REQUIRE(aw::test::wait_until(
    [&] {
      return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
             == n;
    },
    patience));
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
}

BOOST_AUTO_TEST_CASE(runs_with_large_args_parse_them_off_the_executor) {
  // Args past defaults::inline_args_parse_limit are parsed on a blocking
  // thread before the run waits for its transaction (the others on the
  // executor's); either way the run is the same.
  reg->add_transactional<json>(
    "big", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx, std::to_string(args.at("blob").get<std::string>().size()));
    });
  std::string large(200 * 1024, 'x'), small(100, 'y');
  enqueue_n(db, "big", 3, json{{"blob", large}});
  enqueue_n(db, "big", 3, json{{"blob", small}});
  {
    aw::test::worker_node node{grouped(db.config(8), 8, 2), reg};
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
               == 6;
      },
      patience));
  }
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects WHERE note = '"
                      + std::to_string(large.size()) + "'")
             == 3);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects WHERE note = '"
                      + std::to_string(small.size()) + "'")
             == 3);
}

BOOST_AUTO_TEST_CASE(a_group_of_one_commits_each_run_alone) {
  reg->add_transactional<json>(
    "pay", [](const json&, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
    });
  const int n = 60;
  drain(grouped(db.config(16), 1, 2), "pay", n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
  BOOST_TEST(effect_commits(s) == n);
}

BOOST_AUTO_TEST_CASE(a_failure_in_a_group_rolls_back_only_its_own_run) {
  // Runs fail their first attempt three ways: a throw, a statement that
  // fails through exec_params (rolled back to its savepoint), and one
  // through exec (libpqxx then rolls the whole transaction back, and the
  // group's other runs go again, uncharged). Every other run completes on
  // its first attempt, charged nothing.
  reg->add_transactional<json>(
    "mixed", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      write_effect(tx, ctx);
      auto i = args.at("i").get<int>();
      if (ctx.attempt > 1 || i % 10 != 0)
        return;
      if (i % 30 == 0)
        throw std::runtime_error("the bank said no");
      if (i % 30 == 10)
        tx.exec_params("SELECT 1 / $1::int", 0);
      else
        tx.exec("SELECT * FROM no_such_table");
    });
  const int n = 300;
  {
    aw::test::worker_node node{grouped(db.config(32), 16, 2), reg};
    enqueue_n(db, "mixed", n);
    complete_with_retries(node, n);
  }
  // One effect per job, of the run that completed it.
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects AS e JOIN jobs AS j "
                      "ON j.id = e.job_id AND j.attempt = e.attempt")
             == n);
  // Only the runs that failed were charged, and each says why.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE error_count > 0") == n / 10);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE error_count = 1 AND "
                      "(args->>'i')::int % 10 = 0")
             == n / 10);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE (args->>'i')::int % 30 "
                      "= 0 AND last_error_message = 'the bank said no'")
             == n / 30);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE (args->>'i')::int % 30 "
                      "= 10 AND last_error_message LIKE '%division by zero%'")
             == n / 30);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE (args->>'i')::int % 30 "
                      "= 20 AND last_error_message LIKE '%no_such_table%'")
             == n / 30);
  BOOST_TEST(effect_commits(s) < n / 2);
}

BOOST_AUTO_TEST_CASE(a_handler_that_sends_nothing_shares_the_savepoint_before_it) {
  // A run whose handler sends nothing on the connection changed nothing,
  // so the next run of its group goes on in the same savepoint (no round
  // trip of its own); a failure after it rolls back to that savepoint,
  // which holds every earlier run's writes. Four kinds of run, mixed in
  // groups on one connection: a large-object write (through PQfn, which
  // sends no statement libpq reports), a handler that does nothing, one
  // that throws before sending anything on its first attempt, and one
  // whose statement fails after it wrote on its first attempt.
  reg->add_transactional<json>(
    "mixed", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      auto i = args.at("i").get<int>();
      switch (i % 4) {
      case 0: {
        pqxx::largeobject created{tx};
        return;
      }
      case 1:
        return;
      case 2:
        if (ctx.attempt == 1)
          throw std::runtime_error("not yet");
        return;
      default:
        write_effect(tx, ctx);
        if (ctx.attempt == 1)
          tx.exec_params("SELECT 1 / $1::int", 0);
      }
    });
  const int n = 200;
  {
    aw::test::worker_node node{grouped(db.config(16), 16, 1), reg};
    enqueue_n(db, "mixed", n);
    complete_with_retries(node, n);
  }
  // Every large object created stayed, whatever failed after it.
  BOOST_TEST(s.scalar("SELECT count(*) FROM pg_largeobject_metadata") == n / 4);
  // The failing writers' first writes rolled back; their second stayed.
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n / 4);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects WHERE attempt = 2") == n / 4);
  // Only the runs that failed were charged.
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE error_count > 0") == n / 2);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE error_count = 1 AND "
                      "(args->>'i')::int % 4 IN (2, 3)")
             == n / 2);
}

BOOST_AUTO_TEST_CASE(a_run_that_waits_for_a_lock_goes_on_alone) {
  // Run 0 needs a row another session holds locked. In its group it gives
  // up after the lock timeout and runs again alone, where it may wait;
  // meanwhile the others complete. No run is charged.
  db.exec("CREATE TABLE accounts (id int PRIMARY KEY, balance int)");
  db.exec("INSERT INTO accounts VALUES (1, 0)");
  reg->add_transactional<json>(
    "credit", [](const json& args, const aw::job_context& ctx, pqxx::work& tx) {
      if (args.at("i").get<int>() == 0)
        tx.exec_params("UPDATE accounts SET balance = balance + 1 WHERE id = $1", 1);
      write_effect(tx, ctx);
    });
  const int n = 40;
  aw::test::db_session holder{db.url};
  holder.exec("BEGIN");
  holder.exec("SELECT * FROM accounts WHERE id = 1 FOR UPDATE");
  // A lease long enough for the wait (a transaction lasts at most what
  // is left of its lease: reclaim_window - 2 x heartbeat_interval).
  auto cfg = grouped(db.config(16), 16, 2);
  cfg.worker.heartbeat_interval = 5s;
  cfg.worker.reclaim_window = 60s;
  {
    aw::test::worker_node node{cfg, reg};
    enqueue_n(db, "credit", n);
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
               == n - 1;
      },
      patience));
    BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE state = 'running' "
                        "AND (args->>'i')::int = 0")
               == 1);
    holder.exec("COMMIT");
    BOOST_REQUIRE(aw::test::wait_until(
      [&] {
        return s.scalar("SELECT count(*) FROM jobs WHERE state = 'completed'")
               == n;
      },
      patience));
  }
  BOOST_TEST(s.scalar("SELECT balance FROM accounts") == 1);
  BOOST_TEST(s.scalar("SELECT count(*) FROM effects") == n);
  BOOST_TEST(s.scalar("SELECT count(*) FROM jobs WHERE error_count > 0") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
