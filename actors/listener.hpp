#pragma once
// The listener: holds the LISTEN connection and turns each NOTIFY into a
// wake-up for that queue's pollers, each cancel request of `jobs
// cancel` (channel defaults::cancel_channel) into a cancel for the pollers,
// and each change of a queue's pause (defaults::queue_controls_channel, from
// queue_controls' trigger) into a pause or resume for that queue's pollers.
// Runs detached (it blocks in libpq for up to defaults::listen_wait at a
// time). A lost connection is logged at
// ERROR and retried with backoff; after reconnecting it wakes every queue,
// since NOTIFYs sent meanwhile were lost.

#include <memory>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/actors/backoff.hpp"
#include "actor_worker/messages/actors.hpp"
#include "actor_worker/storage/notification_listener.hpp"

namespace aw {

/// The listener: LISTENs for new jobs, cancels and queue controls on a connection of its own, and wakes the supervisor.
struct listener_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "listener";
  /// The listening connection.
  std::unique_ptr<storage::notification_listener> conn;
  /// Told about every notification.
  supervisor_actor wake_target;
  /// Backoff of reconnects while the database is unreachable.
  backoff reconnect_backoff;
};

using listener_pointer = listener_internal::stateful_pointer<listener_state>;

listener_internal::behavior_type
listener_behavior(listener_pointer self, std::string url,
                  supervisor_actor wake_target);

} // namespace aw
