#pragma once
// Cluster-wide queue controls (queue_controls, migrations/013_queue_controls
// .sql) and the per-queue overview behind `actor-worker queues` and the
// dashboard's Queues page.

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pqxx {
class connection_base;
class transaction_base;
}

namespace aw::storage {

/// Every queue the database knows (a queue_controls row, live jobs, dead
/// letters) plus `also` (the caller's configured queues), sorted by name,
/// as a JSON array of objects:
///   queue, paused, paused_at (text or null), global_concurrency (null =
///   none), rate_limit ("N/s", "N/m" or null), available, scheduled,
///   running, waiting_external, dead_lettered, oldest_available_age_seconds
///   (0 with nothing available), unserved (available jobs whose kind no
///   process seen within `reclaim_window` runs in the queue),
///   running_by_node (object: node -> jobs).
nlohmann::json queues_overview(pqxx::connection_base& conn,
                               const std::vector<std::string>& also,
                               std::chrono::milliseconds reclaim_window);

/// Whether `queue` is known to the database: a queue_controls row (every
/// worker writes one per queue it serves at start), or any job or dead
/// letter of it.
bool queue_known(pqxx::transaction_base& tx, const std::string& queue);

/// Pauses `queue` cluster-wide (queue_controls' trigger NOTIFYs the workers
/// when `tx` commits). Returns when the pause began (an earlier pause's
/// time when it already was paused).
std::string pause_queue(pqxx::transaction_base& tx, const std::string& queue);

/// Resumes `queue` (the trigger NOTIFYs every worker when `tx` commits, if
/// it was paused); returns whether it had been paused.
bool resume_queue(pqxx::transaction_base& tx, const std::string& queue);

/// The queue_controls rows, by queue: {paused, paused_at,
/// global_concurrency, rate_limit} as in queues_overview().
nlohmann::json queue_controls(pqxx::transaction_base& tx);

} // namespace aw::storage
