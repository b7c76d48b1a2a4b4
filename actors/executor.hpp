#pragma once
// The executor: one actor per running job. It hands the job to the
// dispatcher (a bounded thread pool: handlers may block), waits for the
// outcome, has storage commit it, then frees its poller's slot and quits.

#include <caf/typed_event_based_actor.hpp>

#include "actors/job_dispatcher.hpp"
#include "messages/actors.hpp"

#include <memory>

namespace aw {

executor_actor::behavior_type
executor_behavior(executor_actor::pointer self, claimed_job job,
                  std::shared_ptr<job_dispatcher> dispatcher,
                  storage_actor completer, poller_actor poller);

} // namespace aw
