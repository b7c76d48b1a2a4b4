// The simulation itself: a seed replays byte for byte, and seeds of every
// fault profile keep every invariant.

#include <boost/test/unit_test.hpp>

#include <spdlog/spdlog.h>

#include "sim/simulation.hpp"

namespace {

aw_sim::sim_result run_seed(uint64_t seed, const std::string& profile = "default",
                            int nodes = 3) {
  spdlog::set_level(spdlog::level::off);
  aw_sim::sim_options opts;
  opts.seed = seed;
  opts.nodes = nodes;
  opts.faults = aw_sim::fault_profile::named(profile);
  return aw_sim::simulate(opts);
}

std::string report(uint64_t seed, const aw_sim::sim_result& r) {
  if (!r.broken)
    return "seed " + std::to_string(seed) + ": no violation";
  std::string out = "seed " + std::to_string(seed) + " step "
                    + std::to_string(r.violation_step) + ": "
                    + r.broken->invariant + ": " + r.broken->detail;
  for (auto& line : r.trace_tail)
    out += "\n    " + line;
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(simulation)

BOOST_AUTO_TEST_CASE(two_runs_of_a_seed_agree_on_the_trace_hash) {
  for (uint64_t seed : {3u, 42u}) {
    auto first = run_seed(seed);
    auto second = run_seed(seed);
    BOOST_TEST(first.trace_lines > 100u);
    BOOST_TEST(first.trace_hash == second.trace_hash);
    BOOST_TEST(first.trace_lines == second.trace_lines);
    BOOST_TEST(first.steps == second.steps);
  }
  BOOST_TEST(run_seed(3).trace_hash != run_seed(4).trace_hash);
}

BOOST_AUTO_TEST_CASE(every_fault_profile_keeps_the_invariants) {
  for (auto profile : {"none", "crash", "network", "clock", "handlers"})
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      auto r = run_seed(seed, profile, seed % 2 == 0 ? 2 : 4);
      BOOST_TEST_INFO(profile);
      BOOST_TEST(!r.broken, report(seed, r));
    }
}

BOOST_AUTO_TEST_CASE(faults_are_injected_and_jobs_complete) {
  uint64_t faults = 0, completed = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    auto r = run_seed(seed);
    faults += r.faults;
    completed += r.completed;
  }
  BOOST_TEST(faults > 20u);
  BOOST_TEST(completed > 50u);
}

BOOST_AUTO_TEST_SUITE_END()
