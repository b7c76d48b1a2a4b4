#include "actor_worker/storage/admin_queues.hpp"

#include <map>

#include <pqxx/pqxx>

#include "actor_worker/config/seconds.hpp"
#include "actor_worker/storage/queue_samples.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

nlohmann::json queues_overview(pqxx::connection_base& conn,
                               const std::vector<std::string>& also,
                               std::chrono::milliseconds reclaim_window) {
  using nlohmann::json;
  std::map<std::string, json> by_queue;
  auto entry = [&](const std::string& queue) -> json& {
    auto i = by_queue.find(queue);
    if (i != by_queue.end())
      return i->second;
    return by_queue[queue] = json{{"queue", queue},
                                  {"paused", false},
                                  {"paused_at", nullptr},
                                  {"global_concurrency", nullptr},
                                  {"rate_limit", nullptr},
                                  {"available", 0},
                                  {"scheduled", 0},
                                  {"running", 0},
                                  {"waiting_external", 0},
                                  {"dead_lettered", 0},
                                  {"oldest_available_age_seconds", 0.0},
                                  {"unserved", 0},
                                  {"running_by_node", json::object()}};
  };
  for (auto& q : also)
    entry(q);
  // One snapshot for the three reads.
  pqxx::read_transaction tx(conn, "aw_queues_overview");
  auto controls = queue_controls(tx);
  for (auto& [name, c] : controls.items()) {
    auto& q = entry(name);
    for (auto& [key, value] : c.items())
      q[key] = value;
  }
  queue_samples_settings(tx);
  for (const auto& row :
       tx.exec_params(sql::queue_samples,
                      fractional_seconds(reclaim_window))) {
    auto& q = entry(row["queue"].as<std::string>());
    auto state = row["state"].as<std::string>();
    auto jobs = row["jobs"].is_null() ? int64_t{0} : row["jobs"].as<int64_t>();
    if (q.contains(state))
      q[state] = q[state].get<int64_t>() + jobs;
    if (state == "available" && !row["oldest_age"].is_null())
      q["oldest_available_age_seconds"]
        = std::max(q["oldest_available_age_seconds"].get<double>(),
                   row["oldest_age"].as<double>());
  }
  for (const auto& row : tx.exec(sql::queue_running_by_node)) {
    auto& q = entry(row["queue"].as<std::string>());
    q["running_by_node"][row["node"].as<std::string>()]
      = row["running"].as<int64_t>();
  }
  json out = json::array();
  for (auto& [name, q] : by_queue)
    out.push_back(std::move(q));
  return out;
}

bool queue_known(pqxx::transaction_base& tx, const std::string& queue) {
  return tx.exec_params1(sql::queue_known, queue)["known"].as<bool>();
}

std::string pause_queue(pqxx::transaction_base& tx, const std::string& queue) {
  auto row = tx.exec_params1(sql::queue_pause, queue);
  return row["paused_at"].as<std::string>();
}

bool resume_queue(pqxx::transaction_base& tx, const std::string& queue) {
  auto row = tx.exec_params1(sql::queue_resume, queue);
  return row["was_paused"].as<bool>();
}

nlohmann::json queue_controls(pqxx::transaction_base& tx) {
  auto out = nlohmann::json::object();
  for (const auto& row : tx.exec(sql::queue_controls_list)) {
    nlohmann::json c{{"paused", row["paused"].as<bool>()},
                     {"paused_at", nullptr},
                     {"global_concurrency", nullptr},
                     {"rate_limit", nullptr}};
    if (!row["paused_at"].is_null())
      c["paused_at"] = row["paused_at"].as<std::string>();
    if (auto gc = row["global_concurrency"].as<int>(); gc > 0)
      c["global_concurrency"] = gc;
    if (auto n = row["rate_limit"].as<int>(); n > 0)
      c["rate_limit"] = std::to_string(n)
                        + (row["rate_period_ms"].as<int64_t>() == 60'000
                             ? "/m"
                             : "/s");
    out[row["queue"].as<std::string>()] = std::move(c);
  }
  return out;
}

} // namespace aw::storage
