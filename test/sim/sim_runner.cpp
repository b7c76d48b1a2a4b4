#include "sim/sim_runner.hpp"

namespace aw_sim {

const char* to_string(handler_plan::ending e) {
  using ending = handler_plan::ending;
  switch (e) {
    case ending::complete:
      return "complete";
    case ending::fail:
      return "throw";
    case ending::fail_terminal:
      return "throw-terminal";
    case ending::retry_after:
      return "retry-after";
    case ending::snooze:
      return "snooze";
    case ending::cancel:
      return "cancel";
    case ending::wait_for_callback:
      return "wait-for-callback";
    case ending::hang:
      return "hang";
  }
  return "?";
}

sim_runner::sim_runner(std::string node, planner plan, recorder record)
  : node_(std::move(node)), plan_(std::move(plan)), record_(std::move(record)) {
  // nop
}

std::optional<aw::job_outcome>
sim_runner::start(aw::claimed_job job, const aw::run_context& ctx,
                  completion done) {
  auto plan = plan_(job);
  record_(node_ + " handler starts job " + std::to_string(job.id) + " lease "
          + std::to_string(job.lease) + " attempt "
          + std::to_string(job.attempt) + ": " + to_string(plan.end) + " after "
          + std::to_string(plan.duration_ms) + " ms");
  if (plan.end == handler_plan::ending::hang)
    return std::nullopt;
  aw::job_outcome o;
  o.job_id = job.id;
  using ending = handler_plan::ending;
  switch (plan.end) {
    case ending::complete:
    case ending::hang:
      o.kind = aw::outcome_kind::completed;
      break;
    case ending::fail:
      o.kind = aw::outcome_kind::retryable_failure;
      o.message = "sim: the handler threw";
      break;
    case ending::fail_terminal:
      o.kind = aw::outcome_kind::terminal_failure;
      o.message = "sim: the handler threw a terminal error";
      break;
    case ending::retry_after:
      o.kind = aw::outcome_kind::retry_after;
      o.message = "sim: retry requested";
      break;
    case ending::snooze:
      o.kind = aw::outcome_kind::snoozed;
      break;
    case ending::cancel:
      o.kind = aw::outcome_kind::cancelled;
      o.message = "sim: cancelled by its handler";
      break;
    case ending::wait_for_callback:
      o.kind = aw::outcome_kind::waiting_callback;
      break;
  }
  o.delay_ms = plan.delay_ms;
  // Ends on the executor's own timer (virtual time); a run that ended
  // first (given up) never hears of it.
  ctx.timers->after(ctx.run, std::chrono::milliseconds{plan.duration_ms},
                    [done, o] { done(o); });
  return std::nullopt;
}

void sim_runner::abandoned(int64_t id) {
  record_(node_ + " gives up job " + std::to_string(id) + " (deadline + grace)");
}

} // namespace aw_sim
