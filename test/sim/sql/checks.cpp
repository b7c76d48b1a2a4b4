#include "checks.hpp"

#include <pqxx/pqxx>

namespace aw::sim::sql {

int token_book::committed_count() const {
  int n = 0;
  for (auto& [t, f] : book_)
    n += f == fate::committed;
  return n;
}

namespace {

/// Every job, live or dead-lettered, in one read of the `jobs` view: the
/// checks work on it in memory. Prepared once per connection, with a
/// generic plan: planning a query of `jobs` over every partition costs
/// more than running it on a schedule's few jobs.
const char* const rows_sql =
  "SELECT id, kind, state, args->>'t', (args->>'parent')::bigint FROM jobs"
  " UNION ALL"
  " SELECT original_job_id, kind, 'dead_letter', args->>'t',"
  "        (args->>'parent')::bigint FROM dead_letter_jobs";

} // namespace

checks::checks(pqxx::connection_base& conn) : conn_(conn) {
  pqxx::nontransaction q(conn_, "aw_sim_checks_prepare");
  q.exec("SET plan_cache_mode = force_generic_plan");
  conn_.prepare("aw_sim_rows", rows_sql);
}

std::vector<finding> checks::after_step(const token_book& tokens) {
  std::vector<finding> out;
  std::map<std::string, int64_t> seen;          // token -> rows
  std::map<int64_t, int64_t> live;              // id -> rows in jobs
  std::map<int64_t, std::string> parents;       // fu job -> its state
  std::map<int64_t, int64_t> children;          // fu job -> follow-ups
  {
    pqxx::read_transaction tx(conn_, "aw_sim_checks");
    for (const auto& row : tx.exec_prepared("aw_sim_rows")) {
      auto id = row[0].as<int64_t>();
      auto kind = row[1].as<std::string>();
      auto state = row[2].as<std::string>();
      if (!row[3].is_null())
        ++seen[row[3].as<std::string>()];
      if (state != "dead_letter")
        ++live[id];
      if (kind == "fu")
        parents[id] = state;
      else if (kind == "child" && !row[4].is_null())
        ++children[row[4].as<int64_t>()];
    }
  }
  for (auto& [t, f] : tokens.all()) {
    auto it = seen.find(t);
    int64_t n = it == seen.end() ? 0 : it->second;
    if (f == token_book::fate::committed && n != 1)
      out.emplace_back("no_job_lost", "committed job " + t + " shows "
                                        + std::to_string(n) + " times");
    else if (f == token_book::fate::rolled_back && n != 0)
      out.emplace_back("no_job_lost", "rolled-back job " + t + " shows "
                                        + std::to_string(n) + " times");
    else if (f == token_book::fate::in_doubt && n > 1)
      out.emplace_back("no_job_lost", "job " + t + " (commit in doubt) shows "
                                        + std::to_string(n) + " times");
  }
  for (auto& [id, n] : live)
    if (n > 1)
      out.emplace_back("no_job_lost", "job " + std::to_string(id) + " shows "
                                        + std::to_string(n) + " times in jobs");
  for (auto& [id, state] : parents) {
    auto n = children.count(id) ? children[id] : 0;
    if (n != (state == "completed" ? 1 : 0))
      out.emplace_back("one_follow_up_set",
                       "job " + std::to_string(id) + " (" + state + ") has "
                         + std::to_string(n) + " follow-ups");
  }
  return out;
}

std::vector<finding> checks::after_drain(const token_book& tokens) {
  auto out = after_step(tokens);
  pqxx::read_transaction tx(conn_, "aw_sim_checks");
  for (const auto& row : tx.exec(
         "SELECT id, state, kind, coalesce(args->>'t', '') FROM jobs"
         " WHERE state NOT IN ('completed', 'cancelled') ORDER BY id LIMIT 20"))
    out.emplace_back("no_job_lost",
                     "job " + row[0].as<std::string>() + " ("
                       + row[2].as<std::string>() + " "
                       + row[3].as<std::string>() + ") is still "
                       + row[1].as<std::string>()
                       + " after the drain: no claim hands it out");
  return out;
}

std::map<int64_t, std::pair<std::string, int>> checks::ends() {
  std::map<int64_t, std::pair<std::string, int>> out;
  pqxx::read_transaction tx(conn_, "aw_sim_ends");
  for (const auto& row : tx.exec(
         "SELECT id, state, error_count FROM jobs UNION ALL"
         " SELECT original_job_id, 'dead_letter', error_count FROM dead_letter_jobs"))
    out[row[0].as<int64_t>()] = {row[1].as<std::string>(), row[2].as<int>()};
  return out;
}

bool checks::lease_taken_back(int64_t lease) {
  pqxx::nontransaction q(conn_, "aw_sim_lease");
  auto r = q.exec_params(
    "SELECT rescued_at IS NOT NULL FROM job_batches WHERE id = $1", lease);
  return r.empty() || r[0][0].as<bool>();
}

} // namespace aw::sim::sql
