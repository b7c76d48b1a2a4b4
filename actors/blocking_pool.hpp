#pragma once
// A bounded pool of threads that runs handlers through a registry. Sized by
// the total concurrency of the node's queues: a handler that blocks holds
// one of these threads, never one of CAF's scheduler threads.

#include <memory>
#include <thread>
#include <vector>

#include "actors/job_dispatcher.hpp"

namespace aw {

class registry;

class blocking_pool : public job_dispatcher {
public:
  blocking_pool(std::shared_ptr<const registry> reg, size_t threads);

  /// Stops taking jobs. Jobs queued but not started are dropped (their
  /// rows were released by the drain); a handler still running past the
  /// drain finishes on its own thread, which then exits: shutdown never
  /// waits for a handler that ignores it.
  ~blocking_pool() override;

  void dispatch(claimed_job job, cancellation_token cancel,
                completion done) override;

  size_t threads() const {
    return threads_;
  }

private:
  struct shared;
  std::shared_ptr<shared> shared_;
  size_t threads_;
};

} // namespace aw
