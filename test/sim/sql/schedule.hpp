#pragma once
// One seeded schedule of sessions against the real SQL (issue 48, part 3):
// workers (each a job_store on a session of its own: claims, outcomes,
// heartbeats, releases, rescues, ring rounds), enqueuers (INSERT and COPY
// in transactions held open across steps, committed late or rolled back),
// a session holding a snapshot open, session kills and clock jumps,
// interleaved a step at a time as the seed says. The checks (checks.hpp)
// run after every step, and a drain at the end proves every job reachable.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace aw::sim::sql {

/// What one schedule does.
struct schedule_options {
  /// The migrated database it runs in (emptied first).
  std::string url;
  /// Chooses every step.
  uint64_t seed = 1;
  /// Steps before the drain.
  int steps = 60;
  /// Print every step as it runs.
  bool verbose = false;
};

/// An invariant found violated.
struct violation {
  /// The invariant's name (checks.hpp).
  std::string invariant;
  /// What was seen.
  std::string detail;
  /// The step after which it was seen (-1: the drain).
  int step = 0;
};

/// What one schedule found.
struct schedule_result {
  std::vector<violation> violations;
  /// One line per step: the trace to read a violation by.
  std::vector<std::string> trace;
  /// Steps that waited on a lock while others ran.
  int blocked_steps = 0;
  /// Steps that waited for a lock of a transaction ending by itself (not
  /// one the schedule keeps open), until it went (schedule.cpp, release).
  int transient_waits = 0;
  /// Sessions killed.
  int kills = 0;
  /// Jobs enqueued and committed.
  int jobs = 0;
  /// 1 when the model could not follow this schedule to its end (a step
  /// in doubt, a rescue under locks): no end compared.
  int unmirrored = 0;
  /// Time spent checking the invariants, in ms.
  double check_ms = 0;
};

class schedule;

/// Runs schedules, one after the other, with the same parties (sessions,
/// connections) in the database at `url`, emptied before each.
class runner {
public:
  explicit runner(const std::string& url);
  ~runner();

  /// Runs one schedule (opts.url is ignored: the runner's).
  schedule_result run(const schedule_options& opts);

private:
  std::unique_ptr<schedule> impl_;
};

} // namespace aw::sim::sql
