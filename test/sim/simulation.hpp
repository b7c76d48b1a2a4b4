#pragma once
// One seed of the whole-runtime simulation: K worker nodes (supervisor,
// pollers, executors, lease keeper, maintenance, storage actors: the real
// actors) in one process on CAF's deterministic test coordinator, in
// virtual time, over the model database. The seed (one std::mt19937_64)
// chooses the jobs, which ready actor runs next, when time moves, every
// handler's duration and ending, and every fault; the invariants are
// checked after every step.
//
// A run has two phases: chaos (faults on) and heal (faults off, every
// node up, ordinary handlers) until every job is final or the heal time
// is up; then "no job lost" is checked.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/fault_profile.hpp"
#include "sim/invariants.hpp"
#include "sim/model_mutations.hpp"

namespace aw_sim {

struct sim_options {
  uint64_t seed = 1;
  /// Worker nodes.
  int nodes = 3;
  fault_profile faults;
  model_mutations mutations;
  /// Jobs enqueued at the start (more arrive during the chaos).
  int jobs = 16;
  /// Virtual time of the chaos phase, and the most the heal may take.
  int64_t chaos_ms = 40000;
  int64_t heal_ms = 240000;
  /// Lines of trace kept for a violation's report.
  size_t trace_tail = 40;
};

struct sim_result {
  std::optional<violation> broken;
  /// Scheduler steps (an actor run once), and the step of the violation.
  uint64_t steps = 0;
  uint64_t violation_step = 0;
  uint64_t trace_hash = 0;
  uint64_t trace_lines = 0;
  std::vector<std::string> trace_tail;
  /// Virtual time at the end (ms).
  int64_t virtual_ms = 0;
  /// Faults injected (crashes, stops, partitions, hangs, jumps, cancels,
  /// lost connections and replies).
  uint64_t faults = 0;
  /// Jobs the run saw, and how many ended completed.
  uint64_t jobs = 0;
  uint64_t completed = 0;
};

/// Runs one seed.
sim_result simulate(const sim_options& opts);

} // namespace aw_sim
