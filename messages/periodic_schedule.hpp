#pragma once
// What the periodic scheduler (actors/periodic_scheduler.hpp) and storage
// exchange: a schedule's row in periodic_schedules, and a tick to enqueue.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace aw {

/// A schedule's row in periodic_schedules (migrations/014_periodic.sql).
struct periodic_row {
  /// The schedule's name ([periodic.NAME]).
  std::string name;
  /// The cron expression and zone its last tick was computed from
  /// (periodic_config::spec()).
  std::string spec;
  /// The latest tick enqueued, in seconds since the epoch.
  int64_t last_tick = 0;
  /// The job enqueued for it.
  int64_t last_job_id = 0;
  /// When it was enqueued, as PostgreSQL prints a timestamptz.
  std::string enqueued_at;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, periodic_row& x) {
  return f(caf::meta::type_name("periodic_row"), x.name, x.spec, x.last_tick,
           x.last_job_id, x.enqueued_at);
}

/// One tick of a schedule, to enqueue exactly once across the cluster.
struct periodic_tick {
  /// The schedule (periodic_schedules.name) and its spec.
  std::string name;
  /// The schedule's cron expression as configured.
  std::string spec;
  /// The tick: the instant the cron expression names, in seconds since the
  /// epoch. Part of the schedule's unique key: a tick at or before the
  /// schedule's last_tick is never enqueued.
  int64_t tick = 0;
  /// The job.
  std::string kind;
  /// JSON object text.
  std::string args = "{}";
  /// The queue the tick's job goes to.
  std::string queue;
  /// The priority of the tick's job.
  int32_t priority = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, periodic_tick& x) {
  return f(caf::meta::type_name("periodic_tick"), x.name, x.spec, x.tick,
           x.kind, x.args, x.queue, x.priority);
}

} // namespace aw
