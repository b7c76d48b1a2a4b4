#include "actor_worker/storage/dashboard_queries.hpp"

#include <algorithm>
#include <limits>

#include <pqxx/pqxx>

#include "actor_worker/config/seconds.hpp"
#include "actor_worker/storage/queue_samples.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

namespace {

using snapshot = pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>;

constexpr int64_t top = std::numeric_limits<int64_t>::max();

/// The dashboard's statements read a few index pages each: parallel
/// workers would only add their start-up (tens of milliseconds on a busy
/// machine) when the planner overestimates a filter. Transaction-local,
/// so it holds behind a transaction-mode pooler too.
void no_parallel_workers(pqxx::transaction_base& tx) {
  tx.exec0("SET LOCAL max_parallel_workers_per_gather = 0");
}

/// Parses PostgreSQL's text form of a bigint[] ("{3,2,1}").
std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> out;
  int64_t value = 0;
  bool in_number = false;
  bool negative = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_number = true;
    } else if (c == '-') {
      negative = true;
    } else {
      if (in_number)
        out.push_back(negative ? -value : value);
      value = 0;
      in_number = false;
      negative = false;
    }
  }
  if (in_number)
    out.push_back(negative ? -value : value);
  return out;
}

std::string ids_literal(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (auto id : ids) {
    if (out.size() > 1)
      out += ',';
    out += std::to_string(id);
  }
  return out + "}";
}

/// What one source of rows found: its hits (newest first), and `floor`
/// when it did not look at everything below `before`: it looked at every
/// id >= floor only.
struct source_hits {
  std::vector<int64_t> ids;
  std::optional<int64_t> floor;
};

/// A source that returns every match up to the limit (live rows).
source_hits exhaustive(const pqxx::row& row, int64_t limit) {
  source_hits s;
  s.ids = parse_ids(row["ids"].as<std::string>("{}"));
  if (static_cast<int64_t>(s.ids.size()) >= limit && !s.ids.empty())
    s.floor = s.ids.back();
  return s;
}

/// A source that looked at no more than `budget` rows (low, scanned, ids).
source_hits budgeted(const pqxx::row& row, int64_t limit, int64_t budget) {
  source_hits s;
  s.ids = parse_ids(row["ids"].as<std::string>("{}"));
  if (static_cast<int64_t>(s.ids.size()) >= limit && !s.ids.empty())
    s.floor = s.ids.back();
  else if (row["scanned"].as<int64_t>(0) >= budget && !row["low"].is_null())
    s.floor = row["low"].as<int64_t>();
  return s;
}

/// Merges sources into one page: only ids every source has looked at
/// (>= the highest floor), newest first, at most `limit`.
struct merged {
  std::vector<int64_t> ids;
  std::optional<int64_t> next_before;
  bool partial = false;
};

merged merge(const std::vector<source_hits>& sources, int64_t limit) {
  std::optional<int64_t> floor;
  for (auto& s : sources)
    if (s.floor && (!floor || *s.floor > *floor))
      floor = s.floor;
  merged m;
  for (auto& s : sources)
    for (auto id : s.ids)
      if (!floor || id >= *floor)
        m.ids.push_back(id);
  std::sort(m.ids.begin(), m.ids.end(), std::greater<>{});
  m.ids.erase(std::unique(m.ids.begin(), m.ids.end()), m.ids.end());
  if (static_cast<int64_t>(m.ids.size()) > limit)
    m.ids.resize(static_cast<size_t>(limit));
  if (static_cast<int64_t>(m.ids.size()) == limit) {
    m.next_before = m.ids.back();
  } else if (floor) {
    // The budget ran out before the page filled: go on below the floor.
    m.next_before = *floor;
    m.partial = true;
  }
  return m;
}

int64_t clamp_limit(int64_t limit) {
  return std::clamp<int64_t>(limit, 1, 500);
}

int64_t clamp_budget(int64_t budget) {
  return std::clamp<int64_t>(budget, 100, 1'000'000);
}

} // namespace

dashboard_page dashboard_jobs(pqxx::connection_base& conn,
                              const dashboard_job_filter& f) {
  const int64_t before = f.before > 0 ? f.before : top;
  const int64_t limit = clamp_limit(f.limit);
  const int64_t budget = clamp_budget(f.scan_budget);
  snapshot tx(conn, "aw_dashboard_jobs");
  no_parallel_workers(tx);
  std::vector<source_hits> sources;
  if (f.state.empty())
    sources.push_back(budgeted(tx.exec_params1(sql::dashboard_jobs_newest,
                                               before, f.queue, f.kind, limit,
                                               budget),
                               limit, budget));
  else
    sources.push_back(exhaustive(tx.exec_params1(sql::dashboard_jobs_state,
                                                 before, f.state, f.queue,
                                                 f.kind, limit),
                                 limit));
  auto m = merge(sources, limit);
  dashboard_page page;
  page.next_before = m.next_before;
  page.partial = m.partial;
  if (!m.ids.empty())
    page.rows = tx.exec_params1(sql::dashboard_jobs_rows, ids_literal(m.ids))
                  ["rows"]
                    .as<std::string>();
  return page;
}

dashboard_page dashboard_dead_letters(pqxx::connection_base& conn,
                                      const dashboard_dead_letter_filter& f) {
  const int64_t before = f.before > 0 ? f.before : top;
  const int64_t limit = clamp_limit(f.limit);
  const int64_t budget = clamp_budget(f.scan_budget);
  snapshot tx(conn, "aw_dashboard_dead_letters");
  no_parallel_workers(tx);
  source_hits hits;
  auto& match = f.match;
  if (!match.kind.empty() && !match.fingerprint.empty())
    hits = exhaustive(tx.exec_params1(sql::dashboard_dead_letters_group,
                                      before, match.kind, match.fingerprint,
                                      match.queue,
                                      limit),
                      limit);
  else
    hits = budgeted(tx.exec_params1(sql::dashboard_dead_letters_newest, before,
                                    match.queue, match.kind,
                                    match.fingerprint, limit,
                                    budget),
                    limit, budget);
  auto m = merge({hits}, limit);
  dashboard_page page;
  page.next_before = m.next_before;
  page.partial = m.partial;
  if (!m.ids.empty())
    page.rows = tx.exec_params1(sql::dashboard_dead_letters_rows,
                                ids_literal(m.ids))["rows"]
                  .as<std::string>();
  return page;
}

std::string failure_groups_json(pqxx::connection_base& conn, int64_t limit) {
  pqxx::read_transaction tx(conn);
  no_parallel_workers(tx);
  return tx.exec_params1(sql::dashboard_failure_groups, clamp_limit(limit))
    ["groups"]
      .as<std::string>();
}

queue_samples dashboard_queue_samples(pqxx::connection_base& conn,
                                      std::chrono::milliseconds reclaim_window) {
  pqxx::read_transaction tx(conn);
  queue_samples_settings(tx);
  return to_queue_samples(tx.exec_params(
    sql::queue_samples, fractional_seconds(reclaim_window)));
}

int64_t count_dead_letters(pqxx::connection_base& conn,
                           const dead_letter_filter& f) {
  pqxx::read_transaction tx(conn);
  no_parallel_workers(tx);
  return tx.exec_params1(sql::dashboard_dead_letters_count, f.id, f.queue,
                         f.kind, f.fingerprint)["n"]
    .as<int64_t>();
}

purge_report purge_dead_letters(pqxx::transaction_base& tx,
                                const dead_letter_filter& f) {
  auto row = tx.exec_params1(sql::dashboard_dead_letters_purge, f.id, f.queue,
                             f.kind, f.fingerprint);
  purge_report r;
  r.purged = row["n"].as<int64_t>();
  r.job_ids = parse_ids(row["job_ids"].as<std::string>("{}"));
  return r;
}

int64_t write_audit(pqxx::transaction_base& tx, const audit_entry& e) {
  std::vector<int64_t> ids = e.job_ids;
  if (ids.size() > 1000)
    ids.resize(1000);
  return tx
    .exec_params1(sql::dashboard_audit_insert, e.action, e.target_json,
                  e.affected, ids_literal(ids), e.outcome, e.remote_addr,
                  e.user_agent, e.worker)["id"]
    .as<int64_t>();
}

dashboard_page audit_log_page(pqxx::connection_base& conn, int64_t before,
                              int64_t limit) {
  limit = clamp_limit(limit);
  pqxx::read_transaction tx(conn);
  auto row = tx.exec_params1(sql::dashboard_audit_list,
                             before > 0 ? before : top, limit);
  dashboard_page page;
  page.rows = row["rows"].as<std::string>();
  if (row["n"].as<int64_t>(0) == limit)
    page.next_before = row["low"].as<int64_t>();
  return page;
}

} // namespace aw::storage
