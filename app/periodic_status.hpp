#pragma once
// What `actor-worker periodic` and the dashboard's /api/schedules show: the
// configured schedules beside their rows in periodic_schedules.

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/periodic_schedule.hpp"

namespace aw {

/// One object per schedule, configured ones first (by name), then rows of
/// schedules no longer configured. Keys (docs/periodic.md):
///   name, configured (bool), cron, timezone, kind, queue, priority,
///   catch_up (null when not configured), last_tick (the latest tick
///   enqueued, "…Z", or null), last_job_id (null when none),
///   last_enqueued_at (the database's time of that enqueue, or null),
///   changed (the last tick was computed from another cron or time zone
///   than the configuration's: the schedule started afresh), next_tick
///   (the schedule's next tick after `now`, or null when not configured
///   or none comes).
nlohmann::json periodic_status(const std::vector<periodic_config>& configured,
                               const std::vector<periodic_row>& rows,
                               std::chrono::system_clock::time_point now);

} // namespace aw
