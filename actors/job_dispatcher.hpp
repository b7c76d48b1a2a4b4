#pragma once
// Where executors hand their jobs to run. Handlers may block, so the runtime
// runs them on a bounded pool of threads (blocking_pool), never on CAF's
// cooperative workers; tests plug in a dispatcher they control.

#include <functional>

#include "app/cancellation.hpp"
#include "messages/job.hpp"

namespace aw {

class job_dispatcher {
public:
  using completion = std::function<void(job_outcome)>;

  virtual ~job_dispatcher() = default;

  /// Runs `job` eventually and calls `done` exactly once with its outcome,
  /// from any thread. The handler sees `cancel` as ctx.cancel.
  virtual void dispatch(claimed_job job, cancellation_token cancel,
                        completion done) = 0;
};

} // namespace aw
