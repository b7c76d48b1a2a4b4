// prometheus_observer's queue samples: the depth gauges per queue label
// (past max_metric_queues, the rest add up in "other"), summed over the
// databases, and the latest sample the dashboard reads. Split from
// app/prometheus_observer.cpp.

#include "actor_worker/app/prometheus_observer.hpp"

#include <algorithm>
#include <iterator>

#include <prometheus/family.h>
#include <prometheus/gauge.h>

namespace aw {

namespace {

const char* const sampled_states[]
  = {"available", "scheduled", "running", "waiting_external"};

} // namespace

void prometheus_observer::sampled(const queue_samples& samples) {
  sampled(*health_.front(), samples);
}

const std::string&
prometheus_observer::queue_label(const std::string& queue) {
  // Under mtx_.
  if (auto i = own_queues_.find(queue); i != own_queues_.end())
    return *i;
  if (auto i = other_queues_.find(queue); i != other_queues_.end())
    return *i;
  if (other_queues_.size() < max_other_queues_)
    return *other_queues_.insert(queue).first;
  return other_queue_;
}

void prometheus_observer::export_sample(const std::string& queue,
                                        const queue_sample& totals) {
  // Under mtx_.
  const int64_t counts[] = {totals.available, totals.scheduled,
                            totals.running, totals.waiting_external};
  for (size_t i = 0; i < std::size(sampled_states); ++i)
    queue_jobs_.Add({{"queue", queue}, {"state", sampled_states[i]}})
      .Set(static_cast<double>(counts[i]));
  oldest_age_.Add({{"queue", queue}})
    .Set(totals.available > 0 ? totals.oldest_available_age_seconds : 0.0);
  dead_letters_.Add({{"queue", queue}})
    .Set(static_cast<double>(totals.dead_lettered));
  unserved_.Add({{"queue", queue}}).Set(static_cast<double>(totals.unserved));
}

void prometheus_observer::drop_sample(const std::string& queue) {
  // Under mtx_.
  for (auto* state : sampled_states)
    queue_jobs_.Remove(&queue_jobs_.Add({{"queue", queue}, {"state", state}}));
  oldest_age_.Remove(&oldest_age_.Add({{"queue", queue}}));
  dead_letters_.Remove(&dead_letters_.Add({{"queue", queue}}));
  unserved_.Remove(&unserved_.Add({{"queue", queue}}));
}

namespace {

/// Adds `q` into `sum`: counts add up, the oldest age is the largest.
void add_sample(queue_sample& sum, const queue_sample& q) {
  sum.available += q.available;
  sum.scheduled += q.scheduled;
  sum.running += q.running;
  sum.waiting_external += q.waiting_external;
  sum.dead_lettered += q.dead_lettered;
  sum.unserved += q.unserved;
  if (q.available > 0)
    sum.oldest_available_age_seconds = std::max(
      sum.oldest_available_age_seconds, q.oldest_available_age_seconds);
}

} // namespace

queue_sample prometheus_observer::total_of(const std::string& queue) const {
  // Under mtx_.
  queue_sample sum;
  sum.queue = queue;
  for (auto& h : health_)
    if (auto i = h->sampled_labels.find(queue); i != h->sampled_labels.end())
      add_sample(sum, i->second);
  return sum;
}

void prometheus_observer::sampled(database_health& h,
                                  const queue_samples& samples) {
  std::lock_guard<std::mutex> guard{mtx_};
  // One series per label: the queues past the label cap add up in "other".
  std::map<std::string, queue_sample> by_label;
  for (auto& q : samples)
    add_sample(by_label[queue_label(q.queue)], q);
  auto before = std::move(h.sampled_labels);
  h.sampled_labels = std::move(by_label);
  for (auto& [label, totals] : h.sampled_labels)
    export_sample(label, total_of(label));
  // A queue that emptied out is 0 now (or what other databases still
  // hold), not its last depth.
  for (auto& [label, totals] : before)
    if (h.sampled_labels.count(label) == 0)
      export_sample(label, total_of(label));
  h.latest.queues = samples;
  h.latest.taken = std::chrono::system_clock::now();
}

queue_snapshot prometheus_observer::latest_sample() const {
  std::lock_guard<std::mutex> guard{mtx_};
  // Every database's queues (a queue lives in one); taken when the oldest
  // of the samples was.
  queue_snapshot all;
  for (auto& h : health_) {
    if (!h->latest.taken)
      continue;
    all.queues.insert(all.queues.end(), h->latest.queues.begin(),
                      h->latest.queues.end());
    if (!all.taken || *h->latest.taken < *all.taken)
      all.taken = h->latest.taken;
  }
  return all;
}

queue_snapshot
prometheus_observer::latest_sample(const std::string& name) const {
  std::lock_guard<std::mutex> guard{mtx_};
  auto* h = find_health(name);
  return h != nullptr ? h->latest : queue_snapshot{};
}

std::map<std::string, queue_slots> prometheus_observer::slots_by_queue() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return slots_;
}

} // namespace aw
