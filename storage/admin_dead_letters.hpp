#pragma once
// Admin queries and changes on the dead letter queue, behind the CLI's
// `dlq list`, `dlq show`, `dlq retry`, `dlq purge` and `jobs show` of a
// dead-lettered job. Rows come back as JSON text whose keys are the
// dead_letter_jobs columns.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pqxx {
class connection_base;
class transaction_base;
}

namespace aw::storage {

/// The dead letter row for original job `job_id`, if the job was
/// dead-lettered.
std::optional<std::string> dead_letter_for_job_json(pqxx::connection_base& conn,
                                                    int64_t job_id);

/// Dead letter `id` (dead_letter_jobs.id, as `dlq list` shows it).
std::optional<std::string> dead_letter_json(pqxx::connection_base& conn,
                                            int64_t id);

/// Dead letter rows, newest first, at most `limit`, optionally of one queue
/// (empty = all), as a JSON array.
std::string dead_letters_json(pqxx::connection_base& conn, int64_t limit,
                              const std::string& queue);

/// Which dead letters `dlq retry` takes: one by id (0 = any), and of a
/// queue, kind and error fingerprint ("" = any; the dashboard's failure
/// groups, migrations/011_dashboard.sql).
struct dead_letter_filter {
  /// One dead letter by its id (dead_letter_jobs.id); 0: any.
  int64_t id = 0;
  /// Only this queue ("" matches any).
  std::string queue;
  /// Only this kind ("" matches any).
  std::string kind;
  /// Only this error fingerprint, a failure group ("" matches any).
  std::string fingerprint;
};

/// A dead letter moved back into `jobs`.
struct retried_dead_letter {
  /// The dead letter's id (dead_letter_jobs.id).
  int64_t dead_letter_id = 0;
  /// The id the job had before it was dead-lettered.
  int64_t original_job_id = 0;
  /// The new job's id.
  int64_t job_id = 0;
  /// The job's kind.
  std::string kind;
  /// The job's queue.
  std::string queue;
};

/// Moves the dead letters matching `filter` back into `jobs` as fresh jobs
/// (due now, attempt 0), deleting them, in one transaction. Each keeps its
/// args, priority, max_attempts, metadata and tags; its metadata gains
/// "retried_from_dead_letter": {"dead_letter_id", "original_job_id"}.
/// Wakes the pollers of their queues. In dead letter id order.
std::vector<retried_dead_letter>
retry_dead_letters(pqxx::connection_base& conn,
                   const dead_letter_filter& filter);

/// The same in the caller's transaction, which commits it (the dashboard
/// writes its audit row in the same transaction).
std::vector<retried_dead_letter>
retry_dead_letters(pqxx::transaction_base& tx,
                   const dead_letter_filter& filter);

/// Deletes the dead letters that failed longer than `older_than` ago
/// (nothing: all) of `queue` ("" = any); returns how many.
int64_t purge_dead_letters(pqxx::connection_base& conn,
                           std::optional<std::chrono::milliseconds> older_than,
                           const std::string& queue);

} // namespace aw::storage
