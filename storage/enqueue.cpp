#include "actor_worker/storage/enqueue.hpp"

#include <algorithm>
#include <iterator>
#include <utility>
#include <stdexcept>

#include <pqxx/pqxx>

#include "actor_worker/config/config.hpp"
#include "actor_worker/config/defaults.hpp"
#include "sql_statements.hpp"

namespace aw {

namespace {

// The statements are storage/sql/enqueue*.sql and unique_*.sql.

// name_problem (config/config.hpp): the rule a configuration's kind and
// queue names follow too.

} // namespace

void check_enqueue(const std::string& kind, const nlohmann::json& args,
               const insert_options& opts) {
  if (auto why = name_problem(kind); !why.empty())
    throw std::invalid_argument("enqueue: the job kind " + why
                                + (kind.empty() ? "" : ": " + nlohmann::json(kind).dump()));
  if (auto why = name_problem(opts.queue); !why.empty())
    throw std::invalid_argument("enqueue: the queue of kind '" + kind + "' "
                                + why
                                + (opts.queue.empty()
                                     ? ""
                                     : ": " + nlohmann::json(opts.queue).dump()));
  if (!args.is_null() && !args.is_object())
    throw std::invalid_argument("enqueue: the args of kind '" + kind
                                + "' must be a JSON object, got "
                                + std::string{args.type_name()});
  if (opts.delay.count() < 0 || opts.delay > aw::defaults::max_duration)
    throw std::invalid_argument("enqueue: the delay of kind '" + kind
                                + "' must be between 0 and 36500 days");
  if (opts.max_attempts
      && (*opts.max_attempts < 1 || *opts.max_attempts > aw::defaults::max_attempts_limit))
    throw std::invalid_argument("enqueue: max_attempts of kind '" + kind
                                + "' must be between 1 and "
                                + std::to_string(aw::defaults::max_attempts_limit)
                                + ", got " + std::to_string(*opts.max_attempts));
  if (opts.deadline
      && (opts.deadline->count() <= 0 || *opts.deadline > aw::defaults::max_duration))
    throw std::invalid_argument("enqueue: the deadline of kind '" + kind
                                + "' must be positive and at most 36500 days");
  if (!opts.metadata.is_object())
    throw std::invalid_argument("enqueue: metadata of kind '" + kind
                                + "' must be a JSON object");
}

namespace {

nlohmann::json to_row(const std::string& kind, const nlohmann::json& args,
                      const insert_options& opts) {
  check_enqueue(kind, args, opts);
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
  if (opts.ordering_key) {
    if (opts.ordering_key->empty())
      throw std::invalid_argument("enqueue: the ordering key of kind '" + kind
                                  + "' must not be empty");
    row["ordering_key"] = *opts.ordering_key;
  }
  if (opts.unique) {
    static const std::vector<std::string> valid = {
      "scheduled", "available", "running", "waiting_external", "completed",
      "cancelled"};
    if (opts.unique->states.empty())
      throw std::invalid_argument("enqueue: the unique states of kind '" + kind
                                  + "' must not be empty");
    for (auto& st : opts.unique->states)
      if (std::find(valid.begin(), valid.end(), st) == valid.end())
        throw std::invalid_argument("enqueue: '" + st + "' (unique states of "
                                    "kind '" + kind + "') is not a job state");
    if (opts.unique->period.count() < 0)
      throw std::invalid_argument("enqueue: the unique period of kind '" + kind
                                  + "' must not be negative");
  }
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

/// True when the bulk path (storage::sql::enqueue_plain) can insert the job: every
/// option but queue and priority at its default.
bool plain(const insert_options& o) {
  return !o.unique && !o.max_attempts && !o.run_at && o.delay.count() == 0
         && o.metadata.is_object() && o.metadata.empty() && o.tags.empty()
         && !o.deadline && !o.ordering_key;
}

/// Appends `text` to an array literal as one quoted element.
void append_element(std::string& literal, const std::string& text) {
  if (literal.size() > 1)
    literal += ',';
  literal += '"';
  for (char c : text) {
    if (c == '"' || c == '\\')
      literal += '\\';
    literal += c;
  }
  literal += '"';
}

} // namespace

namespace {

/// Inserts one unique job, or finds the job that blocks it.
int64_t enqueue_unique(pqxx::transaction_base& tx, const nlohmann::json& row,
                       const enqueue_request& req) {
  const auto& u = *req.options.unique;
  auto key = tx.exec_params1(storage::sql::unique_key, req.kind, row["args"].dump(),
                             u.by_queue, req.options.queue,
                             static_cast<int64_t>(u.period.count()))["key"]
               .as<std::string>();
  std::string states = "{";
  for (size_t i = 0; i < u.states.size(); ++i)
    states += (i > 0 ? "," : "") + u.states[i];
  states += "}";
  // A concurrent producer of the same job makes our INSERT wait for its
  // commit and then do nothing; the lookup (a new statement, so a new
  // snapshot in READ COMMITTED) then sees its row. Should that job leave
  // its unique states in between, insert again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto inserted = tx.exec_params(storage::sql::unique_insert, row.dump(), key, states);
    if (!inserted.empty())
      return inserted[0]["id"].as<int64_t>();
    auto existing = tx.exec_params(storage::sql::unique_existing, key);
    if (!existing.empty())
      return existing[0]["id"].as<int64_t>();
  }
  throw std::runtime_error("enqueue: unique job of kind '" + req.kind
                           + "' neither inserted nor found after 3 tries");
}

} // namespace

namespace {

/// Inserts the plain jobs `plain` (indexes into `jobs`) by COPY, and
/// writes their ids into `ids`: the ids come from the jobs' sequence first
/// (one statement), since COPY returns none.
void enqueue_copied(pqxx::transaction_base& tx,
                    const std::vector<enqueue_request>& jobs,
                    const std::vector<size_t>& plain, std::vector<int64_t>& ids) {
  auto taken = tx.exec_params(storage::sql::enqueue_ids,
                              static_cast<int64_t>(plain.size()));
  pqxx::stream_to copy(tx, "jobs_in",
                       std::vector<std::string>{"id", "kind", "queue", "args",
                                                "priority"});
  for (size_t k = 0; k < plain.size(); ++k) {
    const auto& job = jobs[plain[k]];
    auto id = taken[static_cast<int>(k)][0].as<int64_t>();
    ids[plain[k]] = id;
    copy << std::make_tuple(id, job.kind, job.options.queue,
                            job.args.is_null() ? std::string{"{}"}
                                               : job.args.dump(),
                            job.options.priority);
  }
  copy.complete();
}

} // namespace

std::vector<int64_t> enqueue_many(pqxx::transaction_base& tx,
                                  const std::vector<enqueue_request>& jobs) {
  if (jobs.empty())
    return {};
  std::vector<int64_t> ids(jobs.size(), 0);
  // Three paths, each keeping request order: plain jobs as column arrays,
  // other non-unique jobs as one JSON document, unique jobs one by one.
  std::string kinds = "{", queues = "{", args = "{", priorities = "{";
  std::vector<size_t> plain_jobs;
  auto rows = nlohmann::json::array();
  std::vector<size_t> bulk;
  std::vector<nlohmann::json> unique_rows(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    const auto& job = jobs[i];
    if (plain(job.options)) {
      check_enqueue(job.kind, job.args, job.options);
      plain_jobs.push_back(i);
      continue;
    }
    auto row = to_row(job.kind, job.args, job.options);
    if (job.options.unique) {
      unique_rows[i] = std::move(row);
    } else {
      rows.push_back(std::move(row));
      bulk.push_back(i);
    }
  }
  if (plain_jobs.size() >= aw::defaults::copy_threshold) {
    enqueue_copied(tx, jobs, plain_jobs, ids);
  } else if (!plain_jobs.empty()) {
    for (size_t i : plain_jobs) {
      const auto& job = jobs[i];
      append_element(kinds, job.kind);
      append_element(queues, job.options.queue);
      append_element(args, job.args.is_null() ? std::string{"{}"}
                                              : job.args.dump());
      if (priorities.size() > 1)
        priorities += ',';
      priorities += std::to_string(job.options.priority);
    }
    kinds += '}';
    queues += '}';
    args += '}';
    priorities += '}';
    auto result = tx.exec_params(storage::sql::enqueue_plain, kinds, queues, args,
                                 priorities);
    auto id = result.column_number("id");
    for (size_t k = 0; k < result.size() && k < plain_jobs.size(); ++k)
      ids[plain_jobs[k]] = result[k][id].as<int64_t>();
  }
  if (!bulk.empty()) {
    auto result = tx.exec_params(storage::sql::enqueue, rows.dump());
    auto id = result.column_number("id");
    for (size_t k = 0; k < result.size() && k < bulk.size(); ++k)
      ids[bulk[k]] = result[k][id].as<int64_t>();
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i].options.unique)
      ids[i] = enqueue_unique(tx, unique_rows[i], jobs[i]);
  return ids;
}

int64_t enqueue(pqxx::transaction_base& tx, const std::string& kind,
                const nlohmann::json& args, const insert_options& opts) {
  return enqueue_many(tx, {enqueue_request{kind, args, opts}}).front();
}

} // namespace aw
