#pragma once
// The hook dispatcher: receives committed transitions (from storage after
// each commit, from callback resolutions in this process) and runs the
// hooks of the job's kind in registration order. It runs detached, so a
// slow hook delays only later hooks, never executors, claims or commits.
// Best effort: events still queued when the process stops are lost.

#include <memory>

#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/messages/actors.hpp"
#include "actor_worker/messages/observer.hpp"

namespace aw {

class job_handlers;

/// `watcher` (may be null) counts the hooks that threw.
hook_dispatcher_actor::behavior_type
hook_dispatcher_behavior(hook_dispatcher_actor::pointer self,
                         std::shared_ptr<const job_handlers> reg,
                         std::shared_ptr<observer> watcher);

} // namespace aw
