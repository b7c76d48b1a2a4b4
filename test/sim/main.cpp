// aw_simulate: runs seeds of the whole-runtime simulation (simulation.hpp)
// and reports every violation with its seed, step, invariant and the last
// lines of its trace. scripts/simulate.sh builds and runs it.
//
//   aw_simulate --seeds N [--seed S] [--nodes K] [--faults PROFILE]
//               [--trace-hash] [--stop-at-first] [--jobs J]
//
// --seed S alone replays seed S; with --seeds N it runs S .. S+N-1
// (default S = 1). The last line is "N seeds, V violations", or with
// --trace-hash the hash of the (last) seed's trace. AW_SIM_MUTATION=NAME
// switches a planted mutation on (only in a build with AW_SIM_MUTATIONS).
// Exits 1 on any violation, 2 on bad usage.

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "sim/simulation.hpp"

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "aw_simulate: %s\nusage: aw_simulate --seeds N [--seed S] "
               "[--nodes K] [--faults PROFILE] [--trace-hash] "
               "[--stop-at-first] [--jobs J] [--tail LINES]\n",
               why);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::off);
  aw_sim::sim_options opts;
  uint64_t seeds = 0;
  uint64_t first = 1;
  bool seed_given = false;
  bool trace_hash = false;
  bool stop_at_first = false;
  std::string profile = "default";
  try {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc)
          throw std::invalid_argument(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--seeds")
        seeds = std::stoull(value());
      else if (arg == "--seed") {
        first = std::stoull(value());
        seed_given = true;
      } else if (arg == "--nodes")
        opts.nodes = std::stoi(value());
      else if (arg == "--faults")
        profile = value();
      else if (arg == "--jobs")
        opts.jobs = std::stoi(value());
      else if (arg == "--trace-hash")
        trace_hash = true;
      else if (arg == "--tail")
        opts.trace_tail = std::stoul(value());
      else if (arg == "--stop-at-first")
        stop_at_first = true;
      else
        throw std::invalid_argument("unknown argument " + arg);
    }
    if (seeds == 0)
      seeds = seed_given ? 1 : 0;
    if (seeds == 0)
      throw std::invalid_argument("give --seeds N or --seed S");
    if (opts.nodes < 1)
      throw std::invalid_argument("--nodes must be at least 1");
    opts.faults = aw_sim::fault_profile::named(profile);
    opts.mutations = aw_sim::model_mutations::from_environment();
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  auto started = std::chrono::steady_clock::now();
  uint64_t ran = 0, violations = 0, steps = 0, faults = 0, jobs = 0;
  uint64_t virtual_ms = 0;
  uint64_t hash = 0;
  for (uint64_t s = first; s < first + seeds; ++s) {
    opts.seed = s;
    auto r = aw_sim::simulate(opts);
    ++ran;
    steps += r.steps;
    faults += r.faults;
    jobs += r.jobs;
    virtual_ms += static_cast<uint64_t>(r.virtual_ms);
    hash = r.trace_hash;
    if (r.broken) {
      ++violations;
      std::printf("VIOLATION seed %" PRIu64 " step %" PRIu64 ": %s\n  %s\n"
                  "  last %zu of %" PRIu64 " trace lines:\n",
                  s, r.violation_step, r.broken->invariant.c_str(),
                  r.broken->detail.c_str(), r.trace_tail.size(),
                  r.trace_lines);
      for (auto& line : r.trace_tail)
        std::printf("    %s\n", line.c_str());
      std::printf("  replay: scripts/simulate.sh --seed %" PRIu64
                  " --nodes %d --faults %s%s%s\n",
                  s, opts.nodes, profile.c_str(),
                  std::getenv("AW_SIM_MUTATION") ? " (AW_SIM_MUTATION=" : "",
                  std::getenv("AW_SIM_MUTATION")
                    ? (std::string{std::getenv("AW_SIM_MUTATION")} + ")").c_str()
                    : "");
      std::fflush(stdout);
      if (stop_at_first)
        break;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                              - started)
                  .count();
  std::printf("%.1f seeds/s, %" PRIu64 " steps, %" PRIu64 " faults injected, %"
              PRIu64 " jobs, %.0f s of virtual time (%.1f s wall)\n",
              ran / (secs > 0 ? secs : 1), steps, faults, jobs,
              virtual_ms / 1000.0, secs);
  std::printf("%" PRIu64 " seeds, %" PRIu64 " violations\n", ran, violations);
  if (trace_hash)
    std::printf("%016" PRIx64 "\n", hash);
  return violations > 0 ? 1 : 0;
}
