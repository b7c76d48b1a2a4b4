#pragma once
// The storage actor: owns one storage backend (one connection) and is the
// only actor that runs SQL. It runs detached because libpqxx blocks. The
// backend returns errors instead of throwing, so the deterministic tests
// drive everything below over a scripted fake (test/actors/storage_test).
//
// Outcomes are batched through the mailbox: the first outcome of a batch
// makes the actor send itself a flush; every outcome that arrives before
// that flush is processed joins the batch. At low load a job commits at
// once; under load the batch grows by itself. After each commit every
// poller with outcomes in it gets one `committed` report. A failed commit
// keeps the batch and retries it with backoff; the outcomes are never
// dropped.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/actors/backoff.hpp"
#include "actor_worker/messages/actors.hpp"
#include "actor_worker/messages/observer.hpp"
#include "actor_worker/storage/backend.hpp"

namespace aw {

/// An outcome waiting for the next flush, and the poller to report it to.
struct pending_outcome {
  /// The outcome to record.
  job_outcome outcome;
  /// The poller to report it to once committed.
  poller_actor poller;
};

/// A storage actor: owns one connection (a backend) and records outcomes in batches through its mailbox; also claims, heartbeats, releases and maintenance statements.
struct storage_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "storage";

  /// The connection, behind the backend interface.
  std::shared_ptr<storage::backend> store;
  /// Receives committed transitions for the hooks.
  hook_dispatcher_actor dispatcher;
  /// Metrics and health (may be null).
  std::shared_ptr<observer> watcher;
  /// Outcomes waiting for the next flush.
  std::vector<pending_outcome> pending;
  /// Their number, for the exit functor (which runs after the state is
  /// gone).
  std::shared_ptr<size_t> unrecorded = std::make_shared<size_t>(0);
  /// An attempt to record the pending outcomes broke off with the
  /// connection: it may have committed, so the next attempt must not count
  /// twice what it recorded.
  bool in_doubt = false;
  /// A flush message is on its way through the mailbox (or a retry timer).
  bool flush_scheduled = false;
  /// Backoff of failed flushes.
  backoff flush_backoff;
  /// Jobs set aside by claims (kinds without a handler here), per queue and
  /// kind: when that was last logged and how many since.
  struct set_aside_log {
    /// When the set-aside jobs of this queue and kind were last logged.
    std::chrono::steady_clock::time_point logged_at;
    /// How many were set aside since.
    int64_t unreported = 0;
  };
  /// Set-aside jobs by (queue, kind).
  std::map<std::pair<std::string, std::string>, set_aside_log> set_aside;
};

using storage_pointer = storage_internal::stateful_pointer<storage_state>;

/// The behavior of a storage actor over `store` (one connection, its own).
/// Committed transitions of observed kinds go to `dispatcher` (may be
/// null); what it does is reported to `watcher` (may be null).
storage_internal::behavior_type
storage_behavior(storage_pointer self, std::shared_ptr<storage::backend> store,
                 hook_dispatcher_actor dispatcher,
                 std::shared_ptr<observer> watcher);

} // namespace aw
