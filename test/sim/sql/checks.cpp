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

/// The checks' statements, prepared once per connection with generic
/// plans: planning a query of the `jobs` view over every partition costs
/// more than running it on a schedule's few jobs.
const char* const tokens_sql =
  "SELECT t, count(*) FROM ("
  " SELECT args->>'t' AS t FROM jobs WHERE args ? 't'"
  " UNION ALL SELECT args->>'t' FROM dead_letter_jobs WHERE args ? 't')"
  " AS s GROUP BY t";
const char* const twice_sql =
  "SELECT id, count(*) FROM jobs GROUP BY id HAVING count(*) > 1";
const char* const follow_ups_sql =
  "WITH kids AS ("
  "  SELECT (args->>'parent')::bigint AS parent FROM jobs"
  "   WHERE kind = 'child'"
  "  UNION ALL SELECT (args->>'parent')::bigint FROM dead_letter_jobs"
  "   WHERE kind = 'child')"
  " SELECT p.id, p.state, (SELECT count(*) FROM kids WHERE kids.parent = p.id)"
  "   FROM jobs AS p WHERE p.kind = 'fu'"
  " UNION ALL"
  " SELECT d.original_job_id, 'dead_letter',"
  "        (SELECT count(*) FROM kids WHERE kids.parent = d.original_job_id)"
  "   FROM dead_letter_jobs AS d WHERE d.kind = 'fu'";

} // namespace

checks::checks(pqxx::connection_base& conn) : conn_(conn) {
  pqxx::nontransaction q(conn_, "aw_sim_checks_prepare");
  q.exec("SET plan_cache_mode = force_generic_plan");
  conn_.prepare("aw_sim_tokens", tokens_sql);
  conn_.prepare("aw_sim_twice", twice_sql);
  conn_.prepare("aw_sim_follow_ups", follow_ups_sql);
}

std::vector<finding> checks::after_step(const token_book& tokens) {
  std::vector<finding> out;
  pqxx::read_transaction tx(conn_, "aw_sim_checks");
  std::map<std::string, int64_t> seen;
  for (const auto& row : tx.exec_prepared("aw_sim_tokens"))
    seen[row[0].as<std::string>()] = row[1].as<int64_t>();
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
  for (const auto& row : tx.exec_prepared("aw_sim_twice"))
    out.emplace_back("no_job_lost", "job " + row[0].as<std::string>()
                                      + " shows " + row[1].as<std::string>()
                                      + " times in jobs");
  for (const auto& row : tx.exec_prepared("aw_sim_follow_ups")) {
    auto state = row[1].as<std::string>();
    auto n = row[2].as<int64_t>();
    if (n != (state == "completed" ? 1 : 0))
      out.emplace_back("one_follow_up_set",
                       "job " + row[0].as<std::string>() + " (" + state
                         + ") has " + std::to_string(n) + " follow-ups");
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

bool checks::lease_taken_back(int64_t lease) {
  pqxx::nontransaction q(conn_, "aw_sim_lease");
  auto r = q.exec_params(
    "SELECT rescued_at IS NOT NULL FROM job_batches WHERE id = $1", lease);
  return r.empty() || r[0][0].as<bool>();
}

} // namespace aw::sim::sql
