// Deterministic tests of the storage actor over a scripted backend: how
// outcomes batch through the mailbox, how a batch the database refuses is
// split so one bad outcome cannot hold up the others, and how a broken
// connection keeps the outcomes, retries them with backoff (1 s, 2 s, 4 s
// of virtual time) and marks the retry in doubt.

#include <map>

#include "actor_fixture.hpp"
#include "fake_backend.hpp"

#include "actor_worker/actors/storage.hpp"

using namespace std::chrono_literals;
using namespace aw;
using namespace aw_test;

namespace {

using report_log = std::vector<std::vector<outcome_report>>;

/// Stands in for a poller: records the `committed` reports it receives.
caf::behavior report_sink(caf::event_based_actor*,
                          std::shared_ptr<report_log> log) {
  return {
    [=](committed_atom, std::vector<outcome_report>& reports) {
      log->push_back(std::move(reports));
    },
  };
}

struct storage_fixture : fixture {
  std::shared_ptr<fake_backend> backend = std::make_shared<fake_backend>();
  storage_actor store;

  storage_fixture() {
    backend->now = [this] { return now(); };
    store = sys->spawn(storage_behavior, backend, hook_dispatcher_actor{},
                       std::shared_ptr<aw::observer>{});
    spawned.push_back(caf::actor_cast<caf::actor>(store));
  }

  /// A poller stand-in and the reports it will receive.
  std::pair<poller_actor, std::shared_ptr<report_log>> sink() {
    auto log = std::make_shared<report_log>();
    auto a = sys->spawn(report_sink, log);
    spawned.push_back(a);
    return {caf::actor_cast<poller_actor>(a), log};
  }

  static job_outcome completed(int64_t id, int64_t lease = 0) {
    job_outcome o;
    o.job_id = id;
    o.lease = lease;
    o.attempt = 1;
    return o;
  }

  void finish(std::vector<job_outcome> outcomes, const poller_actor& poller) {
    caf::anon_send(store, finish_atom::value, std::move(outcomes), poller);
  }

  /// Sends a claim at once, ahead of whatever storage has not processed
  /// yet; its answer (or error) lands in the returned slots.
  struct claim_answer {
    std::optional<claim_result> result;
    caf::error error;
  };
  std::shared_ptr<claim_answer> claim(bool awaited = false) {
    auto answer = std::make_shared<claim_answer>();
    auto a = sys->spawn([=, s = store](caf::event_based_actor* self) {
      self->request(s, caf::infinite, claim_atom::value,
                    std::string{"default"}, int32_t{10}, int64_t{1} << 20,
                    int64_t{0}, awaited)
        .then([=](claim_result& r) { answer->result = std::move(r); },
              [=](caf::error& e) { answer->error = std::move(e); });
    });
    spawned.push_back(a);
    sched->prioritize(a);
    sched->run_once();
    return answer;
  }

  static std::vector<int64_t> ids(const std::vector<outcome_report>& rs) {
    std::vector<int64_t> out;
    for (auto& r : rs)
      out.push_back(r.job_id);
    return out;
  }

  /// Every job reported to `log`, in order, with how often.
  static std::vector<int64_t> reported(const report_log& log) {
    std::vector<int64_t> out;
    for (auto& batch : log)
      for (auto& r : batch)
        out.push_back(r.job_id);
    return out;
  }
};

using ids_t = std::vector<int64_t>;

} // namespace

BOOST_FIXTURE_TEST_SUITE(storage_test, storage_fixture)

BOOST_AUTO_TEST_CASE(outcomes_that_arrive_before_the_flush_commit_as_one_batch) {
  auto [a, a_log] = sink();
  auto [b, b_log] = sink();
  finish({completed(1), completed(2)}, a);
  finish({completed(3)}, b);
  finish({completed(4)}, a);
  run();
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 1u);
  BOOST_TEST(backend->writes[0].jobs == (ids_t{1, 2, 3, 4}),
             boost::test_tools::per_element());
  BOOST_TEST(!backend->writes[0].in_doubt);
  // One report per poller per commit, with all of its outcomes.
  BOOST_REQUIRE_EQUAL(a_log->size(), 1u);
  BOOST_TEST(ids(a_log->front()) == (ids_t{1, 2, 4}),
             boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(b_log->size(), 1u);
  BOOST_TEST(ids(b_log->front()) == (ids_t{3}),
             boost::test_tools::per_element());
  // The next outcome is a batch of its own, at once.
  finish({completed(5)}, a);
  run();
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 2u);
  BOOST_TEST(backend->writes[1].jobs == (ids_t{5}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_refused_batch_is_split_and_the_refused_outcome_recorded_as_a_retryable_failure) {
  backend->refused = {2};
  auto [p, log] = sink();
  finish({completed(1), completed(2), completed(3)}, p);
  run();
  // The batch, then one by one; job 2 alone is refused again and goes in
  // as a retryable failure. Nothing waits for a retry timer.
  auto& w = backend->writes;
  BOOST_REQUIRE_EQUAL(w.size(), 5u);
  BOOST_TEST(w[0].jobs == (ids_t{1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(w[1].jobs == (ids_t{1}), boost::test_tools::per_element());
  BOOST_TEST(w[2].jobs == (ids_t{2}), boost::test_tools::per_element());
  BOOST_TEST(w[3].jobs == (ids_t{2}), boost::test_tools::per_element());
  BOOST_TEST((w[3].kinds[0] == outcome_kind::retryable_failure));
  BOOST_TEST(w[4].jobs == (ids_t{3}), boost::test_tools::per_element());
  BOOST_TEST(reported(*log) == (ids_t{1, 2, 3}),
             boost::test_tools::per_element());
  for (auto& batch : *log)
    for (auto& r : batch)
      BOOST_TEST((r.result == finish_result::applied));
  // Nothing is left over: a later outcome commits alone.
  finish({completed(4)}, p);
  advance(60s);
  BOOST_REQUIRE_EQUAL(w.size(), 6u);
  BOOST_TEST(w[5].jobs == (ids_t{4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_outcome_refused_even_as_a_failure_is_reported_stale_and_never_retried) {
  backend->refused_always = {2};
  auto [p, log] = sink();
  finish({completed(1), completed(2), completed(3)}, p);
  run();
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 5u);
  BOOST_TEST(reported(*log) == (ids_t{1, 2, 3}),
             boost::test_tools::per_element());
  auto result_of = [&](int64_t id) {
    for (auto& batch : *log)
      for (auto& r : batch)
        if (r.job_id == id)
          return r.result;
    BOOST_FAIL("job not reported");
    return finish_result::applied;
  };
  BOOST_TEST((result_of(1) == finish_result::applied));
  BOOST_TEST((result_of(2) == finish_result::stale));
  BOOST_TEST((result_of(3) == finish_result::applied));
  advance(60s);
  BOOST_TEST(backend->writes.size() == 5u);
}

BOOST_AUTO_TEST_CASE(a_broken_connection_keeps_the_outcomes_and_retries_them_in_doubt_with_backoff) {
  backend->unavailable_writes = {0, 1, 2};
  auto [p, log] = sink();
  auto t0 = now();
  finish({completed(1), completed(2)}, p);
  run();
  auto& w = backend->writes;
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(!w[0].in_doubt);
  BOOST_TEST(log->empty());
  // 1 s, then 2 s, then 4 s: never sooner.
  advance(999ms);
  BOOST_TEST(w.size() == 1u);
  advance(1ms);
  BOOST_REQUIRE_EQUAL(w.size(), 2u);
  BOOST_TEST((w[1].at - t0 == std::chrono::milliseconds{1000}));
  advance(1999ms);
  BOOST_TEST(w.size() == 2u);
  advance(1ms);
  BOOST_REQUIRE_EQUAL(w.size(), 3u);
  advance(4s);
  BOOST_REQUIRE_EQUAL(w.size(), 4u);
  // Every retry is in doubt: the broken commit may have happened.
  for (size_t i = 1; i < w.size(); ++i) {
    BOOST_TEST(w[i].in_doubt);
    BOOST_TEST(w[i].jobs == (ids_t{1, 2}), boost::test_tools::per_element());
  }
  // Reported once, after the commit that worked.
  BOOST_REQUIRE_EQUAL(log->size(), 1u);
  BOOST_TEST(ids(log->front()) == (ids_t{1, 2}),
             boost::test_tools::per_element());
  // Back to normal: the next outcome commits at once and not in doubt, and
  // a later failure waits 1 s again.
  backend->unavailable_writes.insert(5);
  finish({completed(3)}, p);
  finish({completed(4)}, p);
  run();
  BOOST_REQUIRE_EQUAL(w.size(), 5u);
  BOOST_TEST(!w[4].in_doubt);
  finish({completed(5)}, p);
  run();
  BOOST_REQUIRE_EQUAL(w.size(), 6u);
  advance(1s);
  BOOST_REQUIRE_EQUAL(w.size(), 7u);
  BOOST_TEST(w[6].in_doubt);
  BOOST_TEST(reported(*log) == (ids_t{1, 2, 3, 4, 5}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_connection_lost_while_splitting_keeps_only_what_is_not_recorded) {
  backend->refused = {1};
  // 0: the batch (refused), 1: job 1 alone (refused), 2: job 1 as a
  // failure, 3: job 2 alone, when the connection breaks.
  backend->unavailable_writes = {3};
  auto [p, log] = sink();
  finish({completed(1), completed(2), completed(3)}, p);
  run();
  auto& w = backend->writes;
  BOOST_REQUIRE_EQUAL(w.size(), 4u);
  BOOST_TEST(reported(*log) == (ids_t{1}), boost::test_tools::per_element());
  advance(1s);
  BOOST_REQUIRE_EQUAL(w.size(), 5u);
  BOOST_TEST(w[4].jobs == (ids_t{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(w[4].in_doubt);
  BOOST_TEST(reported(*log) == (ids_t{1, 2, 3}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_claim_commits_the_pending_outcomes_in_its_own_statement) {
  backend->claims = {{7, 8}};
  auto [p, log] = sink();
  // The outcome and the claim are both in the mailbox before the flush.
  finish({completed(1, 100), completed(2, 100)}, p);
  auto answer = claim();
  run();
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 1u);
  BOOST_TEST(backend->writes[0].fused);
  BOOST_REQUIRE(answer->result);
  BOOST_TEST(answer->result->jobs.size() == 2u);
  BOOST_TEST(reported(*log) == (ids_t{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_awaited_claim_runs_before_the_pending_outcomes_commit) {
  // Handlers stand idle for the claim's jobs: the claim does not wait for
  // the outcomes' commit (a WAL flush); they commit right after it.
  backend->claims = {{7, 8}};
  auto [p, log] = sink();
  finish({completed(1, 100), completed(2, 100)}, p);
  auto answer = claim(true);
  run();
  BOOST_REQUIRE_EQUAL(backend->writes_at_claim.size(), 1u);
  BOOST_TEST(backend->writes_at_claim[0] == 0u);
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 1u);
  BOOST_TEST(!backend->writes[0].fused);
  BOOST_REQUIRE(answer->result);
  BOOST_TEST(answer->result->jobs.size() == 2u);
  BOOST_TEST(reported(*log) == (ids_t{1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_awaited_claim_that_fails_leaves_the_outcomes_to_their_flush) {
  backend->claims_unavailable = true;
  auto [p, log] = sink();
  finish({completed(1, 100)}, p);
  auto answer = claim(true);
  run();
  BOOST_TEST(!answer->result);
  BOOST_TEST(static_cast<bool>(answer->error));
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 1u);
  BOOST_TEST(!backend->writes[0].in_doubt);
  BOOST_TEST(reported(*log) == (ids_t{1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_fused_claim_that_loses_the_connection_fails_and_its_outcomes_are_retried_in_doubt) {
  backend->unavailable_writes = {0};
  auto [p, log] = sink();
  finish({completed(1, 100)}, p);
  auto answer = claim();
  run();
  // The claim reports the error (its poller backs off); the flush already
  // queued records the outcome, in doubt.
  BOOST_TEST(!answer->result);
  BOOST_TEST(static_cast<bool>(answer->error));
  auto& w = backend->writes;
  BOOST_REQUIRE_EQUAL(w.size(), 2u);
  BOOST_TEST(w[0].fused);
  BOOST_TEST(!w[1].fused);
  BOOST_TEST(w[1].in_doubt);
  BOOST_TEST(reported(*log) == (ids_t{1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_fused_claim_the_database_refuses_splits_the_outcomes_then_claims) {
  backend->refused = {2};
  backend->claims = {{9}};
  auto [p, log] = sink();
  finish({completed(1, 100), completed(2, 100)}, p);
  auto answer = claim();
  run();
  auto& w = backend->writes;
  // fused (refused), the batch alone (refused), 1, 2, 2 as a failure.
  BOOST_REQUIRE_EQUAL(w.size(), 5u);
  BOOST_TEST(w[0].fused);
  BOOST_TEST((w[4].kinds[0] == outcome_kind::retryable_failure));
  BOOST_REQUIRE(answer->result);
  BOOST_TEST(answer->result->jobs.size() == 1u);
  BOOST_TEST(reported(*log) == (ids_t{1, 2}), boost::test_tools::per_element());
}

namespace {

/// Remembers what storage reports to the node's observer.
struct recording_observer : aw::observer {
  std::vector<std::pair<int64_t, execution_result>> recorded_outcomes;
  std::vector<std::string> errors;
  std::vector<bool> reachability;
  std::vector<std::string> follow_up_failures;
  void recorded(const job_outcome& o, execution_result r) override {
    recorded_outcomes.emplace_back(o.job_id, r);
  }
  void database_error(const char* operation) override {
    errors.emplace_back(operation);
  }
  void database_reachable(bool up) override {
    if (reachability.empty() || reachability.back() != up)
      reachability.push_back(up);
  }
  void follow_ups_failed(const char* stage) override {
    follow_up_failures.emplace_back(stage);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(the_observer_hears_outcomes_errors_and_reachability) {
  auto watcher = std::make_shared<recording_observer>();
  auto observed = sys->spawn(storage_behavior, backend, hook_dispatcher_actor{},
                             std::shared_ptr<aw::observer>{watcher});
  spawned.push_back(caf::actor_cast<caf::actor>(observed));
  auto [p, log] = sink();
  // The first commit breaks off; the retry a second later works.
  backend->unavailable_writes = {0};
  backend->refused = {2};
  caf::anon_send(observed, finish_atom::value,
                 std::vector<job_outcome>{completed(1), completed(2)}, p);
  run();
  BOOST_TEST(watcher->recorded_outcomes.empty());
  BOOST_TEST(watcher->errors == (std::vector<std::string>{"finish"}),
             boost::test_tools::per_element());
  BOOST_TEST(watcher->reachability == (std::vector<bool>{false}),
             boost::test_tools::per_element());
  advance(1s);
  // Job 1 completed; job 2's outcome was refused (a follow-up that failed)
  // and recorded as a retry instead. Counted once each, after the commit.
  BOOST_REQUIRE_EQUAL(watcher->recorded_outcomes.size(), 2u);
  std::map<int64_t, execution_result> by_id(watcher->recorded_outcomes.begin(),
                                            watcher->recorded_outcomes.end());
  BOOST_TEST((by_id.at(1) == execution_result::completed));
  BOOST_TEST((by_id.at(2) == execution_result::retried));
  BOOST_TEST(watcher->follow_up_failures
               == (std::vector<std::string>{"outcome"}),
             boost::test_tools::per_element());
  BOOST_TEST(watcher->reachability == (std::vector<bool>{false, true}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_outcome_committed_by_its_handlers_transaction_is_only_reported) {
  auto watcher = std::make_shared<recording_observer>();
  auto observed = sys->spawn(storage_behavior, backend, hook_dispatcher_actor{},
                             std::shared_ptr<aw::observer>{watcher});
  spawned.push_back(caf::actor_cast<caf::actor>(observed));
  auto [p, log] = sink();
  auto mine = completed(2);
  mine.record = outcome_record::committed;
  caf::anon_send(observed, finish_atom::value,
                 std::vector<job_outcome>{completed(1), mine, completed(3)}, p);
  run();
  // Only the others are written; the committed one is reported at once.
  BOOST_REQUIRE_EQUAL(backend->writes.size(), 1u);
  BOOST_TEST(backend->writes[0].jobs == (ids_t{1, 3}),
             boost::test_tools::per_element());
  BOOST_TEST(reported(*log) == (ids_t{2, 1, 3}),
             boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(watcher->recorded_outcomes.size(), 3u);
  // Alone, it writes nothing at all.
  auto alone = completed(4);
  alone.record = outcome_record::committed;
  caf::anon_send(observed, finish_atom::value, std::vector<job_outcome>{alone},
                 p);
  run();
  BOOST_TEST(backend->writes.size() == 1u);
  BOOST_TEST(reported(*log).back() == 4);
}

BOOST_AUTO_TEST_CASE(a_failed_claim_is_an_error_for_the_poller_and_changes_no_outcome) {
  backend->claims_unavailable = true;
  auto answer = claim();
  run();
  BOOST_TEST(!answer->result);
  BOOST_REQUIRE(static_cast<bool>(answer->error));
  BOOST_TEST((static_cast<ec>(answer->error.code()) == ec::database_unavailable));
  BOOST_TEST(backend->writes.empty());
  // The next claim goes through (the backend reconnects by itself).
  backend->claims_unavailable = false;
  backend->claims = {{3}};
  auto again = claim();
  run();
  BOOST_REQUIRE(again->result);
  BOOST_TEST(again->result->jobs.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
