#include "storage/enqueue.hpp"

#include <stdexcept>

#include <pqxx/pqxx>

namespace aw {

namespace {

// All rows travel as one JSON array parameter: one statement and one
// round trip however many jobs, and no SQL is ever built from values.
constexpr const char* enqueue_sql = R"sql(
INSERT INTO jobs (kind, queue, args, state, priority, run_at, max_attempts,
                  metadata, tags, deadline_ms)
SELECT r.kind, r.queue, r.args,
       CASE WHEN r.run_at > now() THEN 'scheduled' ELSE 'available' END,
       r.priority, r.run_at, r.max_attempts, r.metadata, r.tags, r.deadline_ms
  FROM (SELECT e.doc->>'kind' AS kind,
               e.doc->>'queue' AS queue,
               e.doc->'args' AS args,
               (e.doc->>'priority')::integer AS priority,
               coalesce((e.doc->>'run_at')::timestamptz,
                        now() + (e.doc->>'delay_ms')::bigint
                                * interval '1 millisecond') AS run_at,
               (e.doc->>'max_attempts')::integer AS max_attempts,
               e.doc->'metadata' AS metadata,
               ARRAY(SELECT jsonb_array_elements_text(e.doc->'tags')) AS tags,
               (e.doc->>'deadline_ms')::bigint AS deadline_ms,
               e.ord
          FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(doc, ord)) AS r
 ORDER BY r.ord
RETURNING id
)sql";

nlohmann::json to_row(const std::string& kind, const nlohmann::json& args,
                      const insert_options& opts) {
  if (kind.empty())
    throw std::invalid_argument("enqueue: the job kind must not be empty");
  if (opts.queue.empty())
    throw std::invalid_argument("enqueue: the queue of kind '" + kind
                                + "' must not be empty");
  if (opts.max_attempts && *opts.max_attempts < 1)
    throw std::invalid_argument("enqueue: max_attempts of kind '" + kind
                                + "' must be at least 1, got "
                                + std::to_string(*opts.max_attempts));
  if (opts.deadline && opts.deadline->count() <= 0)
    throw std::invalid_argument("enqueue: the deadline of kind '" + kind
                                + "' must be positive");
  if (!opts.metadata.is_object())
    throw std::invalid_argument("enqueue: metadata of kind '" + kind
                                + "' must be a JSON object");
  nlohmann::json row = {
    {"kind", kind},
    {"queue", opts.queue},
    // `{}` in C++ braces becomes JSON null; a job without args has `{}`.
    {"args", args.is_null() ? nlohmann::json::object() : args},
    {"priority", opts.priority},
    {"delay_ms", opts.delay.count()},
    {"metadata", opts.metadata},
    {"tags", opts.tags},
  };
  if (opts.max_attempts)
    row["max_attempts"] = *opts.max_attempts;
  if (opts.deadline)
    row["deadline_ms"] = opts.deadline->count();
  if (opts.run_at) {
    // Microseconds since the epoch, rendered as an ISO timestamp in UTC.
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                opts.run_at->time_since_epoch())
                .count();
    auto secs = static_cast<time_t>(us / 1'000'000);
    auto frac = us % 1'000'000;
    if (frac < 0) {
      frac += 1'000'000;
      --secs;
    }
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char full[80];
    std::snprintf(full, sizeof full, "%s.%06ldZ", buf, static_cast<long>(frac));
    row["run_at"] = full;
  }
  return row;
}

} // namespace

std::vector<int64_t> enqueue_many(pqxx::transaction_base& tx,
                                  const std::vector<enqueue_request>& jobs) {
  if (jobs.empty())
    return {};
  auto rows = nlohmann::json::array();
  for (const auto& job : jobs)
    rows.push_back(to_row(job.kind, job.args, job.options));
  auto result = tx.exec_params(enqueue_sql, rows.dump());
  std::vector<int64_t> ids;
  ids.reserve(result.size());
  for (const auto& row : result)
    ids.push_back(row[0].as<int64_t>());
  return ids;
}

int64_t enqueue(pqxx::transaction_base& tx, const std::string& kind,
                const nlohmann::json& args, const insert_options& opts) {
  return enqueue_many(tx, {enqueue_request{kind, args, opts}}).front();
}

} // namespace aw
