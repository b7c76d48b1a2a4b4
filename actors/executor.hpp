#pragma once
// The executor: one actor per running job. It hands the job to the
// dispatcher (a bounded thread pool: handlers may block), waits for the
// outcome, has storage commit it, then frees its poller's slot and quits.
//
// It owns the run's cancellation token: the token is cancelled when the
// deadline passes (the outcome then becomes a deadline rescue), when the
// lease turns out to be lost (no outcome is written), and when the
// executor stops for any other reason (shutdown).

#include <memory>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/job_dispatcher.hpp"
#include "messages/actors.hpp"

namespace aw {

struct executor_state {
  static inline const char* name = "executor";
  int64_t job_id = 0;
  int64_t deadline_ms = 0;
  cancellation_token cancel;
  /// The deadline passed before the handler returned.
  bool overran = false;
  /// The job is no longer ours: its outcome must not be written.
  bool lost = false;
};

using executor_pointer = executor_actor::stateful_pointer<executor_state>;

executor_actor::behavior_type
executor_behavior(executor_pointer self, claimed_job job,
                  std::shared_ptr<job_dispatcher> dispatcher,
                  storage_actor completer, poller_actor poller);

} // namespace aw
