#include "actor_worker/storage/periodic_schedules.hpp"

#include <chrono>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/config/cron.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

int64_t enqueue_periodic_tick(pqxx::transaction_base& tx,
                              const periodic_tick& tick) {
  auto taken = tx.exec_params(sql::periodic_claim_tick, tick.name, tick.spec,
                              tick.tick);
  if (taken.empty())
    return 0;
  auto at = format_utc(cron_time{std::chrono::seconds{tick.tick}});
  insert_options opts;
  opts.queue = tick.queue;
  opts.priority = tick.priority;
  opts.metadata = {{"periodic", tick.name}, {"tick", at}};
  auto id = enqueue(tx, tick.kind, nlohmann::json::parse(tick.args), opts);
  tx.exec_params0(sql::periodic_set_job, tick.name, id);
  return id;
}

std::vector<periodic_row> periodic_rows(pqxx::transaction_base& tx) {
  std::vector<periodic_row> out;
  for (const auto& r : tx.exec(sql::periodic_rows)) {
    periodic_row row;
    row.name = r["name"].as<std::string>();
    row.spec = r["spec"].as<std::string>();
    row.last_tick = r["last_tick"].as<int64_t>();
    row.last_job_id = r["last_job_id"].as<int64_t>();
    row.enqueued_at = r["enqueued_at"].as<std::string>();
    out.push_back(std::move(row));
  }
  return out;
}

} // namespace aw::storage
