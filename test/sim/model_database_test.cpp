// The model database keeps the storage contract by itself, before any
// actor drives it: claim order, the lease guard, retries and dead letters,
// rescue of silent workers charging only started jobs, take-back of
// claims in doubt, unique and ordering keys, follow-ups all or nothing.

#include <boost/test/unit_test.hpp>

#include <stdexcept>

#include "sim/model_backend.hpp"
#include "sim/model_database.hpp"

using namespace aw_sim;

namespace {

struct model_fixture {
  int64_t clock = 0;
  model_database db{model_settings{3, 3000}, [this] { return clock; }};

  int64_t add(int priority = 0, std::string kind = "plain") {
    aw::enqueue_request r;
    r.kind = std::move(kind);
    r.options.priority = priority;
    return db.enqueue(r);
  }

  aw::claim_result claim(const std::string& worker, int limit = 10) {
    aw::storage::claim_request req;
    req.queue = "default";
    req.limit = limit;
    return db.claim(worker, req);
  }

  aw::job_outcome outcome(const aw::claimed_job& j, aw::outcome_kind kind) {
    aw::job_outcome o;
    o.job_id = j.id;
    o.lease = j.lease;
    o.kind = kind;
    return o;
  }

  std::vector<aw::storage::finish_report>
  finish(const std::string& worker, std::vector<aw::job_outcome> outcomes) {
    return db.finish(worker, outcomes,
                     aw::storage::failure_follow_ups::in_transaction, nullptr);
  }

  model_state state(int64_t id) {
    return db.jobs().at(id).state;
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(model_database_tests, model_fixture)

BOOST_AUTO_TEST_CASE(claims_by_priority_then_run_at_then_id_under_one_lease) {
  auto a = add(0);
  auto b = add(-1);
  auto c = add(0);
  auto got = claim("w1");
  BOOST_REQUIRE_EQUAL(got.jobs.size(), 3u);
  BOOST_TEST(got.jobs[0].id == b);
  BOOST_TEST(got.jobs[1].id == a);
  BOOST_TEST(got.jobs[2].id == c);
  BOOST_TEST(got.jobs[0].lease == got.jobs[2].lease);
  BOOST_TEST(claim("w2").jobs.empty()); // running jobs are not due
}

BOOST_AUTO_TEST_CASE(an_outcome_applies_only_under_the_lease_that_holds_the_job) {
  add();
  auto run = claim("w1").jobs.at(0);
  auto stale = run;
  stale.lease += 100;
  auto r = finish("w1", {outcome(stale, aw::outcome_kind::completed)});
  BOOST_TEST((r.at(0).result == aw::finish_result::stale));
  r = finish("w1", {outcome(run, aw::outcome_kind::completed)});
  BOOST_TEST((r.at(0).result == aw::finish_result::applied));
  // The same outcome again (a retry after a lost reply) counts once.
  r = finish("w1", {outcome(run, aw::outcome_kind::completed)});
  BOOST_TEST((r.at(0).result == aw::finish_result::stale));
  BOOST_TEST((state(run.id) == model_state::completed));
}

BOOST_AUTO_TEST_CASE(failures_back_off_then_dead_letter_on_the_last_attempt) {
  auto id = add();
  for (int attempt = 1; attempt <= 4; ++attempt) {
    auto got = claim("w1");
    BOOST_REQUIRE_EQUAL(got.jobs.size(), 1u);
    finish("w1", {outcome(got.jobs[0], aw::outcome_kind::retryable_failure)});
    if (attempt < 4) {
      BOOST_TEST((state(id) == model_state::scheduled));
      BOOST_TEST(db.jobs().at(id).run_at_ms == clock + (int64_t{1000} << attempt));
      clock = db.jobs().at(id).run_at_ms;
    }
  }
  BOOST_TEST((state(id) == model_state::dead));
  BOOST_TEST(db.jobs().at(id).error_count == 4);
}

BOOST_AUTO_TEST_CASE(a_silent_worker_is_rescued_charging_only_started_jobs) {
  auto started = add();
  auto buffered = add();
  db.refresh_node("w1", 2, true);
  auto got = claim("w1");
  db.record_starts({{started, got.jobs.at(0).lease, 0}});
  clock = 2000;
  db.refresh_node("w1", 2, true);
  clock = 4000; // seen 2 s ago, claimed 4 s ago: alive
  BOOST_TEST(db.rescue(10).empty());
  clock = 5001; // silent for the window
  auto rescued = db.rescue(10);
  BOOST_REQUIRE_EQUAL(rescued.size(), 1u);
  BOOST_TEST(rescued[0].id == started);
  BOOST_TEST(db.jobs().at(started).error_count == 1);
  BOOST_TEST((state(buffered) == model_state::available));
  BOOST_TEST(db.jobs().at(buffered).error_count == 0);
  // The silent worker's late outcome is stale.
  auto r = finish("w1", {outcome(got.jobs.at(0), aw::outcome_kind::completed)});
  BOOST_TEST((r.at(0).result == aw::finish_result::stale));
}

BOOST_AUTO_TEST_CASE(a_claim_whose_reply_was_lost_is_taken_back_by_the_heartbeat) {
  auto id = add();
  auto lost = claim("w1").jobs.at(0).lease;
  clock = 1000;
  BOOST_TEST(db.heartbeat("w1", {}).empty());
  BOOST_TEST(db.rescue(10).empty()); // not older than the window yet
  clock = 3500;
  db.heartbeat("w1", {});
  BOOST_TEST(db.heartbeat("w1", {lost}).empty());
  db.rescue(10);
  BOOST_TEST((state(id) == model_state::available));
}

BOOST_AUTO_TEST_CASE(unique_and_ordering_keys) {
  aw::enqueue_request u;
  u.kind = "plain";
  u.options.unique = aw::unique_options{};
  auto first = db.enqueue(u);
  BOOST_TEST(db.enqueue(u) == first);
  aw::enqueue_request o;
  o.kind = "plain";
  o.options.ordering_key = "k";
  auto one = db.enqueue(o);
  auto two = db.enqueue(o);
  auto got = claim("w1");
  std::vector<int64_t> ids;
  for (auto& j : got.jobs)
    ids.push_back(j.id);
  BOOST_TEST((std::find(ids.begin(), ids.end(), one) != ids.end()));
  BOOST_TEST((std::find(ids.begin(), ids.end(), two) == ids.end()));
}

BOOST_AUTO_TEST_CASE(a_follow_up_that_fails_rolls_its_outcome_back) {
  add(0, "chain");
  auto run = claim("w1").jobs.at(0);
  model_backend conn(std::shared_ptr<model_database>(&db, [](model_database*) {}),
                     "w1",
                     [](const aw::job_event&) -> std::vector<aw::enqueue_request> {
                       throw std::runtime_error("no such queue");
                     },
                     nullptr);
  auto r = conn.finish({outcome(run, aw::outcome_kind::completed)}, false,
                       aw::storage::failure_follow_ups::in_transaction);
  BOOST_TEST(!r);
  BOOST_TEST((state(run.id) == model_state::running));
}

BOOST_AUTO_TEST_SUITE_END()
