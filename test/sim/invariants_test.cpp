// The invariants fire on what breaks them. The four planted mutations
// (mutation_test) prove four of them against the running model; these
// cases prove the other four on hand-made histories.

#include <boost/test/unit_test.hpp>

#include "sim/invariants.hpp"

using namespace aw_sim;

namespace {

struct checker_fixture {
  int64_t clock = 0;
  model_database db{model_settings{3, 3000}, [this] { return clock; }};
  invariants check{db, 10000};

  checker_fixture() {
    db.observer = [this](const model_change& c) { check.on_change(c); };
  }

  aw::claimed_job claim_one(const std::string& worker) {
    aw::storage::claim_request req;
    req.queue = "default";
    return db.claim(worker, req).jobs.at(0);
  }

  std::string broken() {
    return check.broken() ? check.broken()->invariant : std::string{};
  }
};

aw::enqueue_request plain() {
  aw::enqueue_request r;
  r.kind = "plain";
  return r;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(invariants_tests, checker_fixture)

BOOST_AUTO_TEST_CASE(a_job_left_running_is_lost) {
  db.enqueue(plain());
  claim_one("w1");
  check.check_end();
  BOOST_TEST(broken() == invariant::no_job_lost);
}

BOOST_AUTO_TEST_CASE(a_crashed_nodes_job_held_past_the_bound_breaks_recovery) {
  db.enqueue(plain());
  claim_one("w1");
  check.on_crash("w1", 0);
  check.check_step(10000);
  BOOST_TEST(broken().empty());
  check.check_step(10001);
  BOOST_TEST(broken() == invariant::crash_recovery);
}

BOOST_AUTO_TEST_CASE(an_outage_moves_the_crash_deadline) {
  db.enqueue(plain());
  claim_one("w1");
  check.on_crash("w1", 0);
  check.hold_crash_deadlines(5000);
  check.check_step(14000);
  BOOST_TEST(broken().empty());
}

BOOST_AUTO_TEST_CASE(a_release_that_gives_back_a_started_attempt_breaks_shutdown) {
  auto id = db.enqueue(plain());
  auto run = claim_one("w1");
  db.record_starts({{id, run.lease, 0}});
  db.release("w1", {{id, run.lease, 0}}, false);
  BOOST_TEST(broken() == invariant::uncharged_release);
}

BOOST_AUTO_TEST_CASE(a_release_of_started_jobs_as_started_is_fine) {
  auto id = db.enqueue(plain());
  auto run = claim_one("w1");
  db.record_starts({{id, run.lease, 0}});
  db.release("w1", {{id, run.lease, 0}}, true);
  check.check_step(0);
  BOOST_TEST(broken().empty());
}

BOOST_AUTO_TEST_CASE(a_hook_event_without_its_commit_breaks_the_hooks) {
  db.enqueue(plain());
  auto run = claim_one("w1");
  aw::job_event started;
  started.type = aw::event_type::started;
  started.job_json = run.started_row;
  check.on_hook(started);
  BOOST_TEST(broken().empty());
  aw::job_event invented = started;
  invented.type = aw::event_type::completed; // nothing completed it
  check.on_hook(invented);
  BOOST_TEST(broken() == invariant::hooks_match_commits);
}

BOOST_AUTO_TEST_CASE(a_hook_event_fired_twice_breaks_the_hooks) {
  db.enqueue(plain());
  auto run = claim_one("w1");
  aw::job_event started;
  started.type = aw::event_type::started;
  started.job_json = run.started_row;
  check.on_hook(started);
  check.on_hook(started);
  BOOST_TEST(broken() == invariant::hooks_match_commits);
}

BOOST_AUTO_TEST_SUITE_END()
