#include "actor_worker/storage/queue_samples.hpp"

#include <algorithm>
#include <map>

#include <pqxx/pqxx>

namespace aw::storage {

void queue_samples_settings(pqxx::transaction_base& tx) {
  // One round trip: both in one simple query.
  tx.exec0("SET LOCAL enable_seqscan = off; SET LOCAL jit = off");
}

queue_samples to_queue_samples(const pqxx::result& rows) {
  std::map<std::string, queue_sample> by_queue;
  for (const auto& row : rows) {
    auto queue = row["queue"].as<std::string>();
    auto& q = by_queue[queue];
    q.queue = queue;
    auto state = row["state"].as<std::string>();
    auto jobs = row["jobs"].is_null() ? 0 : row["jobs"].as<int64_t>();
    if (state == "available") {
      q.available += jobs;
      if (!row["oldest"].is_null()) {
        auto age = row["oldest_age"].as<double>();
        q.oldest_available_age_seconds
          = std::max(q.oldest_available_age_seconds, age);
      }
    } else if (state == "scheduled") {
      q.scheduled += jobs;
    } else if (state == "running") {
      q.running += jobs;
    } else if (state == "waiting_external") {
      q.waiting_external += jobs;
    } else if (state == "dead_lettered") {
      q.dead_lettered += jobs;
    } else if (state == "unserved") {
      q.unserved += jobs;
    }
  }
  queue_samples out;
  out.reserve(by_queue.size());
  for (auto& [name, q] : by_queue)
    out.push_back(std::move(q));
  return out;
}

} // namespace aw::storage
