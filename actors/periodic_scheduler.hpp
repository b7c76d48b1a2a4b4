#pragma once
// The periodic scheduler: enqueues the ticks of the [periodic.NAME]
// schedules (config/cron.hpp), each exactly once across the cluster.
//
// Maintenance spawns it, linked, when the configuration has schedules: it
// runs where and while maintenance runs, on the cluster's leader alone
// (the supervisor starts maintenance when its node becomes the leader and
// stops it when it steps down). Two schedulers at once (two leaders for a
// moment) are harmless: the database takes each tick once. It works over
// a storage actor of its own, so a tick never waits behind a vacuum or a
// big rescue.
//
// At start it reads every schedule's row (its last tick, and the spec that
// tick was computed from). For each schedule:
//
// - no row, or a row whose spec (cron expression and time zone) differs
//   from the configuration's: the schedule is new; its first tick is the
//   first after now (nothing from before is caught up);
// - a row whose next tick after last_tick is already past: ticks were
//   missed (no scheduler ran, or a hand-over). The latest of them, L, is
//   enqueued when it is less than defaults::periodic_misfire_grace old
//   (it is the current tick, just late) or when catch_up = "latest";
//   with catch_up = "none" an older L is skipped. Never more than one
//   tick is enqueued for a stretch of missed ones.
//
// Then it sleeps until the earliest next tick of all schedules (at most
// defaults::periodic_max_sleep, to notice a wall clock that was set), and
// when it wakes enqueues every due tick, one statement each (storage takes
// the tick and inserts the job in one transaction; another scheduler that
// took the tick first makes it a no-op: the tick is part of the
// schedule's unique key). The same rule applies to a tick that comes due
// while an enqueue failed (the database is down): retried with backoff,
// the latest due tick is enqueued, if on time or catch_up = "latest".
//
// Time: ticks are instants of the wall clock (`wall_clock`); timers go
// through the actor clock, so the deterministic tests drive both with the
// test coordinator's virtual time.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/actors/backoff.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/actors.hpp"

namespace aw {

/// What the periodic scheduler needs: its connection, the schedules and its clock.
struct periodic_scheduler_config {
  /// Ticks are enqueued here: a connection no other actor uses.
  storage_actor store;
  /// The schedules ([periodic.NAME], validated by the loader).
  std::vector<periodic_config> schedules;
  /// The wall clock the ticks are read from; empty: the system clock.
  std::function<std::chrono::system_clock::time_point()> wall_clock;
  /// A tick handled later than this after its time is missed.
  std::chrono::milliseconds misfire_grace = defaults::periodic_misfire_grace;
  /// The longest sleep between two looks at the clock.
  std::chrono::milliseconds max_sleep = defaults::periodic_max_sleep;
};

/// One schedule and where it stands.
struct periodic_entry {
  /// The schedule as configured.
  periodic_config config;
  /// Its parsed cron expression and time zone.
  cron_schedule schedule;
  /// The next tick to enqueue; nothing before the rows are read, or when
  /// the expression has no tick left.
  std::optional<cron_time> next;
};

/// The periodic scheduler: enqueues each tick of the [periodic.NAME] schedules once for the cluster.
struct periodic_state {
  /// The actor's name in CAF's logs.
  static inline const char* name = "periodic";
  /// Its configuration.
  periodic_scheduler_config cfg;
  /// Every schedule and where it stands.
  std::vector<periodic_entry> entries;
  /// The rows were read (the schedules know their last tick).
  bool loaded = false;
  /// An enqueue (or the load) is in flight: nothing else starts.
  bool busy = false;
  /// Only the timer of this generation counts (a re-armed timer replaces
  /// the earlier one).
  uint64_t generation = 0;
  /// Backoff of failed loads and enqueues.
  backoff retry;
};

using periodic_pointer = periodic_internal::stateful_pointer<periodic_state>;

periodic_internal::behavior_type
periodic_behavior(periodic_pointer self, periodic_scheduler_config cfg);

} // namespace aw
