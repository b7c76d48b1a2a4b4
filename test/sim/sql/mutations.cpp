#include "mutations.hpp"

#include <stdexcept>

#include <pqxx/pqxx>

#include "actor_worker/storage/migrations.hpp"

namespace aw::sim::sql {

const std::vector<mutation>& sql_mutations() {
  static const std::vector<mutation> all = {
    // A tick reads only the jobs of transactions that started after its
    // lower snapshot: those its lower snapshot saw running (its xip list)
    // and that committed later are never handed out.
    {"tick_skips_late", "actor_worker_lane_jobs",
     "WHERE x.xid >= p_after_xid",
     "WHERE false AND x.xid >= p_after_xid",
     "no_job_lost"},
    // The row claim takes rows off the lanes whatever their state: it no
    // longer re-checks (under FOR UPDATE) that a job is still waiting.
    {"claim_no_recheck", "actor_worker_claim_rows",
     "AND j.ready_xid = '0' AND j.state IN ('available', 'scheduled')",
     "AND j.ready_xid = '0'",
     "one_live_lease"},
    // Outcomes of lane jobs find their batch by id and worker alone, not
    // whether a rescue took the lease back: an outcome of an earlier run
    // is recorded.
    {"outcome_by_id", "actor_worker_live_batches",
     "AND b.rescued_at IS NULL",
     "",
     "stale_outcome_refused"},
    // The rescue takes every worker's old claims, not only those of
    // workers silent for the reclaim window.
    {"rescue_unguarded", "actor_worker_rescue",
     "OR n.last_seen_at < now() - make_interval(secs => p_window_s))",
     "OR true)",
     "no_rescue_of_live_lease"},
    // The bug the schedules found (fixed): a worker rescued once is never
    // looked at again, so what it claimed after its rescue, before a
    // refresh of its row, stays running for good.
    {"rescued_worker_claims_again", "actor_worker_rescue",
     "OR EXISTS (SELECT 1 FROM job_batches AS x\n"
     "                        WHERE x.worker = n.worker_id AND x.rescued_at IS NULL\n"
     "                          AND x.finished_at IS NULL))",
     "OR false)",
     "no_job_lost"},
  };
  return all;
}

const mutation& find_mutation(const std::string& name) {
  for (auto& m : sql_mutations())
    if (m.name == name)
      return m;
  std::string known;
  for (auto& m : sql_mutations())
    known += (known.empty() ? "" : ", ") + m.name;
  throw std::runtime_error("AW_SIM_MUTATION=" + name
                           + ": no such mutation in SQL (known: " + known
                           + ")");
}

std::string apply_mutation(pqxx::connection_base& conn, const mutation& m) {
  // The file that defines the function (its own, or the file of the
  // function that alone calls it: the claim's file holds its helpers).
  const storage::sql_function* fn = nullptr;
  const std::string definition = "FUNCTION " + m.function + "(";
  for (auto& f : storage::embedded_functions())
    if (f.sql.find(definition) != std::string::npos)
      fn = &f;
  if (fn == nullptr)
    throw std::runtime_error("mutation " + m.name + ": no SQL file defines "
                             + m.function);
  std::string text = fn->sql;
  size_t at = text.find(m.original);
  if (at == std::string::npos)
    throw std::runtime_error(
      "mutation " + m.name + ": storage/sql/functions/" + fn->name
      + ".sql no longer contains \"" + m.original
      + "\": update test/sim/sql/mutations.cpp to the new SQL");
  // The whole file is run again: every function it defines is re-created,
  // the mutated one with the change.
  while (at != std::string::npos) {
    text.replace(at, m.original.size(), m.mutated);
    at = text.find(m.original, at + m.mutated.size());
  }
  pqxx::work tx(conn, "aw_sim_mutation");
  tx.exec(text);
  tx.commit();
  return "storage/sql/functions/" + fn->name + ".sql";
}

} // namespace aw::sim::sql
