#pragma once
// Read-only admin queries behind the CLI's `jobs show` and `dlq list`.
// Results are JSON text whose keys are the tables' column names.

#include <cstdint>
#include <optional>
#include <string>

namespace pqxx {
class connection_base;
}

namespace aw::storage {

/// The jobs row `id` as a JSON object, or nothing if there is no such row.
std::optional<std::string> job_json(pqxx::connection_base& conn, int64_t id);

/// The dead letter row for original job `job_id`, if the job was
/// dead-lettered.
std::optional<std::string> dead_letter_for_job_json(pqxx::connection_base& conn,
                                                    int64_t job_id);

/// Dead letter rows, newest first, at most `limit`, optionally of one queue
/// (empty = all), as a JSON array.
std::string dead_letters_json(pqxx::connection_base& conn, int64_t limit,
                              const std::string& queue);

} // namespace aw::storage
