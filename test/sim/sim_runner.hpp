#pragma once
// The handlers of one simulated node: each run follows a plan the seed
// chose (how long it takes and how it ends, including throwing, hanging
// and overrunning its deadline), and ends on the executor's timer, in
// virtual time. A hung handler never ends by itself: its executor cancels
// it at its deadline and gives it up after the grace.

#include <functional>
#include <memory>
#include <string>

#include "actor_worker/actors/job_runner.hpp"

#include "sim/trace.hpp"

namespace aw_sim {

/// How one run goes.
struct handler_plan {
  enum class ending : uint8_t {
    complete,
    /// Throws: a retryable failure.
    fail,
    /// Throws aw::terminal_error: dead-lettered at once.
    fail_terminal,
    retry_after,
    snooze,
    cancel,
    wait_for_callback,
    /// Never returns (its deadline cancels it, the grace gives it up).
    hang,
  };
  ending end = ending::complete;
  /// How long it runs before it ends (ms of virtual time).
  int64_t duration_ms = 0;
  /// retry_after / snooze: the delay; wait_for_callback: the timeout.
  int64_t delay_ms = 0;
};

const char* to_string(handler_plan::ending e);

class sim_runner : public aw::job_runner {
public:
  using planner = std::function<handler_plan(const aw::claimed_job&)>;
  using recorder = std::function<void(const std::string&)>;

  /// The runner of node `node`: `plan` decides each run, `record` writes
  /// the trace.
  sim_runner(std::string node, planner plan, recorder record);

  std::optional<aw::job_outcome> start(aw::claimed_job job,
                                       const aw::run_context& ctx,
                                       completion done) override;
  void abandoned(int64_t id) override;

private:
  std::string node_;
  planner plan_;
  recorder record_;
};

} // namespace aw_sim
