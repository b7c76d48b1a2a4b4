// Each planted mutation of the model (model_mutations.hpp) is caught
// within 1,000 seeds, by the invariant it breaks (issue 48, part 4).

#include <boost/test/unit_test.hpp>

#include <spdlog/spdlog.h>

#include "sim/simulation.hpp"

namespace {

struct caught {
  uint64_t seed = 0;
  std::string invariant;
  std::string detail;
};

/// The first seed of 1..1000 that finds a violation with `mutation` on.
caught first_catch(const std::string& mutation) {
  spdlog::set_level(spdlog::level::off);
  aw_sim::sim_options opts;
  BOOST_REQUIRE(opts.mutations.enable(mutation));
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    opts.seed = seed;
    auto r = aw_sim::simulate(opts);
    if (r.broken)
      return {seed, r.broken->invariant, r.broken->detail};
  }
  return {};
}

void expect_caught(const std::string& mutation, const char* invariant) {
  auto c = first_catch(mutation);
  BOOST_TEST_MESSAGE(mutation << ": caught at seed " << c.seed << " by '"
                              << c.invariant << "': " << c.detail);
  BOOST_TEST(c.seed != 0u, mutation << " was not caught within 1,000 seeds");
  BOOST_TEST(c.invariant == invariant);
}

} // namespace

BOOST_AUTO_TEST_SUITE(mutations)

BOOST_AUTO_TEST_CASE(a_claim_without_its_recheck_is_caught) {
  expect_caught("claim_no_recheck", aw_sim::invariant::one_live_execution);
}

BOOST_AUTO_TEST_CASE(an_outcome_guarded_by_the_id_only_is_caught) {
  expect_caught("outcome_by_id", aw_sim::invariant::no_stale_outcome);
}

BOOST_AUTO_TEST_CASE(a_rescue_without_its_guard_is_caught) {
  expect_caught("rescue_unguarded", aw_sim::invariant::guarded_rescue);
}

BOOST_AUTO_TEST_CASE(a_follow_up_inserted_twice_is_caught) {
  expect_caught("followup_twice", aw_sim::invariant::one_follow_up_set);
}

BOOST_AUTO_TEST_SUITE_END()
