#include "actor_worker/app/prometheus_observer.hpp"

#include <algorithm>
#include <iterator>
#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "actor_worker/config/seconds.hpp"

namespace aw {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// Handlers run from milliseconds to hours: 5 ms ... 6 h.
const prometheus::Histogram::BucketBoundaries duration_buckets{
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
  1800, 3600, 21600};

// Pickup latency, from a job's due time to its start: 1 ms ... 1 h.
const prometheus::Histogram::BucketBoundaries wait_buckets{
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
  60, 300, 900, 3600};

// Jobs per claim: 1 ... the largest local queue.
const prometheus::Histogram::BucketBoundaries claim_buckets{
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};

} // namespace

nlohmann::json readiness::to_json() const {
  return {{"ready", ready}, {"reasons", reasons}};
}

prometheus_observer::prometheus_observer(std::vector<std::string> kinds,
                                         std::vector<std::string> queues,
                                         std::string version,
                                         std::vector<std::string> databases,
                                         int max_other_queues)
  : registry_(std::make_shared<prometheus::Registry>()),
    kinds_(kinds.begin(), kinds.end()),
    own_queues_(queues.begin(), queues.end()),
    max_other_queues_(static_cast<size_t>(std::max(0, max_other_queues))),
    started_(BuildCounter()
               .Name("actor_worker_jobs_started_total")
               .Help("Jobs whose handler started on this node.")
               .Register(*registry_)),
    executions_(BuildCounter()
                  .Name("actor_worker_job_executions_total")
                  .Help("Runs on this node whose outcome was recorded, by "
                        "where they took the job (completed, retried, "
                        "dead_lettered, cancelled, snoozed, parked, lost).")
                  .Register(*registry_)),
    rescues_(BuildCounter()
               .Name("actor_worker_jobs_rescued_total")
               .Help("Jobs rescued by this node, by reason: of any node by "
                     "its maintenance (stale_heartbeat, expired_callback), "
                     "of its own runs by its executors (deadline_exceeded); "
                     "and whether they went to the dead letter queue.")
               .Register(*registry_)),
    duration_(BuildHistogram()
                .Name("actor_worker_job_duration_seconds")
                .Help("How long handlers ran on this node.")
                .Register(*registry_)),
    wait_(BuildHistogram()
            .Name("actor_worker_job_queue_wait_seconds")
            .Help("Pickup latency: from a job's due time (run_at) to its "
                  "handler's start on this node.")
            .Register(*registry_)),
    claim_size_(BuildHistogram()
                  .Name("actor_worker_claim_batch_size")
                  .Help("Jobs per claim of this node (empty claims "
                        "included).")
                  .Register(*registry_)),
    queue_jobs_(BuildGauge()
                  .Name("actor_worker_queue_jobs")
                  .Help("Jobs of the queue by state, cluster-wide, as of the "
                        "last sample (every node exports the same numbers: "
                        "aggregate with max by (queue, state)).")
                  .Register(*registry_)),
    oldest_age_(BuildGauge()
                  .Name("actor_worker_queue_oldest_job_age_seconds")
                  .Help("Age of the queue's oldest due available job since "
                        "it became due, cluster-wide (0: none waiting).")
                  .Register(*registry_)),
    dead_letters_(BuildGauge()
                    .Name("actor_worker_dead_letter_jobs")
                    .Help("Dead letters of the queue, cluster-wide, as of "
                          "the last sample.")
                    .Register(*registry_)),
    unserved_(BuildGauge()
                .Name("actor_worker_queue_unserved_jobs")
                .Help("Due available jobs of the queue whose kind no live "
                      "worker runs in it (they wait until one starts), "
                      "cluster-wide, as of the last sample.")
                .Register(*registry_)),
    running_(BuildGauge()
               .Name("actor_worker_jobs_running")
               .Help("Handlers of the queue running on this node.")
               .Register(*registry_)),
    limit_(BuildGauge()
             .Name("actor_worker_queue_concurrency_limit")
             .Help("The queue's concurrency on this node.")
             .Register(*registry_)),
    free_slots_(BuildGauge()
                  .Name("actor_worker_queue_free_slots")
                  .Help("The queue's idle handler slots on this node.")
                  .Register(*registry_)),
    db_errors_(BuildCounter()
                 .Name("actor_worker_database_errors_total")
                 .Help("Statements of this node that failed, by operation.")
                 .Register(*registry_)),
    hook_failures_(BuildCounter()
                     .Name("actor_worker_hook_failures_total")
                     .Help("Lifecycle hooks that threw, by job kind.")
                     .Register(*registry_)),
    follow_up_failures_(BuildCounter()
                          .Name("actor_worker_follow_up_failures_total")
                          .Help("Follow-up jobs that could not be enqueued: "
                                "stage outcome (the outcome was recorded as "
                                "a retry instead) or rescue (the rescue "
                                "stands without them).")
                          .Register(*registry_)),
    database_up_(BuildGauge()
                   .Name("actor_worker_database_up")
                   .Help("1 when this node's last statement reached the "
                         "database, else 0.")
                   .Register(*registry_)),
    ready_(BuildGauge()
             .Name("actor_worker_ready")
             .Help("1 when /readyz answers 200: database reachable, schema "
                   "compatible, not draining.")
             .Register(*registry_)
             .Add({})),
    leader_(BuildGauge()
              .Name("actor_worker_leader")
              .Help("1 while this process is the elected leader of the "
                    "database's cluster (it runs maintenance and samples "
                    "the queues), else 0.")
              .Register(*registry_)) {
  if (databases.empty())
    databases.emplace_back(defaults::database_name);
  for (auto& name : databases) {
    auto h = std::make_unique<database_health>();
    h->name = name;
    h->up = &database_up_.Add({{"database", name}});
    h->leader = &leader_.Add({{"database", name}});
    health_.push_back(std::move(h));
  }
  BuildGauge()
    .Name("actor_worker_build_info")
    .Help("The running actor-worker's version (value 1).")
    .Register(*registry_)
    .Add({{"version", std::move(version)}})
    .Set(1);
  // Every bounded series exists from the start, so rate() sees its first
  // increase.
  follow_up_failures_.Add({{"stage", "outcome"}});
  follow_up_failures_.Add({{"stage", "rescue"}});
  follow_up_failures_.Add({{"stage", "exhausted"}});
  follow_up_failures_.Add({{"stage", "retried"}});
  for (auto* op : {"claim", "finish", "finish_and_claim", "heartbeat",
                   "cancel_requests", "rescue", "release", "cleanup", "vacuum",
                   "sample_queues", "wait_times", "refresh_node", "resign"})
    db_errors_.Add({{"operation", op}});
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& kind : kinds_) {
    hook_failures_.Add({{"kind", kind}});
    for (auto& queue : queues) {
      series_of(queue, kind);
      for (auto* reason : {"stale_heartbeat", "expired_callback"})
        for (auto* dead : {"true", "false"})
          rescues_.Add({{"queue", queue},
                        {"kind", kind},
                        {"reason", reason},
                        {"dead_lettered", dead}});
    }
  }
  for (auto& queue : queues)
    series_of(queue);
}

prometheus_observer::~prometheus_observer() = default;

std::string prometheus_observer::scrape() const {
  ready_.Set(ready().ready ? 1 : 0);
  std::ostringstream out;
  prometheus::TextSerializer{}.Serialize(out, registry_->Collect());
  return out.str();
}

void prometheus_observer::add_reasons(const database_health& h,
                                      readiness& r) const {
  // One database: the reasons read as always; several: each names its
  // database.
  std::string of = health_.size() > 1 ? " (database '" + h.name + "')"
                                      : std::string{};
  switch (h.reachable.load(std::memory_order_relaxed)) {
    case 0:
      r.reasons.emplace_back("database not reached yet" + of);
      break;
    case -1:
      r.reasons.emplace_back("database unreachable" + of);
      break;
    default:
      break;
  }
  switch (h.schema.load(std::memory_order_relaxed)) {
    case 0:
      r.reasons.emplace_back("schema not checked yet" + of);
      break;
    case -1:
      r.reasons.emplace_back(
        "schema out of date: run `actor-worker migrate`" + of);
      break;
    default:
      break;
  }
}

readiness prometheus_observer::ready() const {
  readiness r;
  for (auto& h : health_)
    add_reasons(*h, r);
  if (draining_.load(std::memory_order_relaxed))
    r.reasons.emplace_back("draining: the node is stopping");
  r.ready = r.reasons.empty();
  return r;
}

std::optional<readiness>
prometheus_observer::ready_of(const std::string& name) const {
  auto* h = find_health(name);
  if (h == nullptr)
    return std::nullopt;
  readiness r;
  add_reasons(*h, r);
  if (draining_.load(std::memory_order_relaxed))
    r.reasons.emplace_back("draining: the node is stopping");
  r.ready = r.reasons.empty();
  return r;
}

const prometheus_observer::database_health*
prometheus_observer::find_health(const std::string& name) const {
  for (auto& h : health_)
    if (h->name == name)
      return h.get();
  return nullptr;
}

prometheus_observer::database_health&
prometheus_observer::health_of(const std::string& name) {
  for (auto& h : health_)
    if (h->name == name)
      return *h;
  return *health_.front();
}

void prometheus_observer::reachable(database_health& h, bool up) {
  // A plain store per statement; the gauge follows at the next change.
  int now = up ? 1 : -1;
  if (h.reachable.exchange(now, std::memory_order_relaxed) != now)
    h.up->Set(up ? 1 : 0);
}

void prometheus_observer::database_reachable(bool up) {
  reachable(*health_.front(), up);
}

void prometheus_observer::schema_checked(bool compatible) {
  health_.front()->schema.store(compatible ? 1 : -1,
                                std::memory_order_relaxed);
}

void prometheus_observer::draining() {
  draining_.store(true, std::memory_order_relaxed);
}

void prometheus_observer::leadership(bool leader) {
  leadership(*health_.front(), leader);
}

void prometheus_observer::leadership(database_health& h, bool leader) {
  std::lock_guard<std::mutex> guard{mtx_};
  h.leader->Set(leader ? 1 : 0);
  if (leader)
    return;
  // Only the leader samples the queues: a node that stopped leading drops
  // its depth series rather than export a sample that no longer moves (a
  // label another database led here still has keeps that one's numbers).
  auto labels = std::move(h.sampled_labels);
  h.sampled_labels.clear();
  for (auto& [label, totals] : labels) {
    bool elsewhere = false;
    for (auto& other : health_)
      elsewhere = elsewhere || other->sampled_labels.count(label) > 0;
    if (elsewhere)
      export_sample(label, total_of(label));
    else
      drop_sample(label);
  }
  h.latest = queue_snapshot{};
}

/// What the actors of one database report to: the health calls to its
/// entry, everything else to the node's observer as it is.
class prometheus_observer::database_view final : public observer {
public:
  database_view(std::shared_ptr<prometheus_observer> node, database_health& health)
    : node_(std::move(node)), health_(health) {
  }
  void database_reachable(bool up) override {
    node_->reachable(health_, up);
  }
  void schema_checked(bool compatible) override {
    health_.schema.store(compatible ? 1 : -1, std::memory_order_relaxed);
  }
  void draining() override {
    node_->draining();
  }
  void leadership(bool leader) override {
    node_->leadership(health_, leader);
  }
  bool wants_wait_times() const override {
    return node_->wants_wait_times();
  }
  void claimed(const std::string& queue, size_t jobs) override {
    node_->claimed(queue, jobs);
  }
  void started(const std::string& queue, const std::string& kind,
               double wait_seconds) override {
    node_->started(queue, kind, wait_seconds);
  }
  void recorded(const job_outcome& outcome, execution_result r) override {
    node_->recorded(outcome, r);
  }
  void rescued(const rescued_job& job) override {
    node_->rescued(job);
  }
  void database_error(const char* operation) override {
    node_->database_error(operation);
  }
  void hooks_failed(const std::string& kind, int failures) override {
    node_->hooks_failed(kind, failures);
  }
  void follow_ups_failed(const char* stage) override {
    node_->follow_ups_failed(stage);
  }
  void slots(const std::string& queue, int running, int concurrency) override {
    node_->slots(queue, running, concurrency);
  }
  void sampled(const queue_samples& samples) override {
    node_->sampled(health_, samples);
  }

private:
  // Shared: an actor may report after the runtime let go of the observer
  // (a late sample at stop), and its entry lives in the observer.
  std::shared_ptr<prometheus_observer> node_;
  database_health& health_;
};

std::shared_ptr<observer>
prometheus_observer::for_database(const std::string& name) {
  return std::make_shared<database_view>(shared_from_this(), health_of(name));
}

const std::string&
prometheus_observer::kind_label(const std::string& kind) const {
  auto i = kinds_.find(kind);
  return i != kinds_.end() ? *i : other_kind_;
}

prometheus_observer::kind_series&
prometheus_observer::series_of(const std::string& queue,
                               const std::string& kind) {
  // Under mtx_.
  auto i = by_kind_.find(pair_less::view{queue, kind});
  if (i != by_kind_.end())
    return i->second;
  kind_series s;
  const auto& label = kind_label(kind);
  s.started = &started_.Add({{"queue", queue}, {"kind", label}});
  for (size_t r = 0; r < result_count; ++r)
    s.executions[r] = &executions_.Add(
      {{"queue", queue},
       {"kind", label},
       {"outcome", to_string(static_cast<execution_result>(r))}});
  s.duration = &duration_.Add({{"queue", queue}, {"kind", label}},
                              duration_buckets);
  return by_kind_.emplace(std::make_pair(queue, kind), s).first->second;
}

prometheus_observer::queue_series&
prometheus_observer::series_of(const std::string& queue) {
  // Under mtx_.
  auto i = by_queue_.find(std::string_view{queue});
  if (i != by_queue_.end())
    return i->second;
  queue_series s;
  s.wait = &wait_.Add({{"queue", queue}}, wait_buckets);
  s.claim = &claim_size_.Add({{"queue", queue}}, claim_buckets);
  s.running = &running_.Add({{"queue", queue}});
  s.limit = &limit_.Add({{"queue", queue}});
  s.free = &free_slots_.Add({{"queue", queue}});
  return by_queue_.emplace(queue, s).first->second;
}

void prometheus_observer::claimed(const std::string& queue, size_t jobs) {
  std::lock_guard<std::mutex> guard{mtx_};
  series_of(queue).claim->Observe(static_cast<double>(jobs));
}

void prometheus_observer::started(const std::string& queue,
                                  const std::string& kind,
                                  double wait_seconds) {
  std::lock_guard<std::mutex> guard{mtx_};
  series_of(queue, kind).started->Increment();
  if (wait_seconds >= 0)
    series_of(queue).wait->Observe(wait_seconds);
}

namespace {

int64_t current_interval() {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  return now / prometheus_observer::throughput_bucket_seconds;
}

} // namespace

void prometheus_observer::recorded(const job_outcome& o, execution_result r) {
  auto interval = current_interval();
  std::lock_guard<std::mutex> guard{mtx_};
  auto& s = series_of(o.queue, o.job_kind);
  s.executions[static_cast<size_t>(r)]->Increment();
  auto& bucket = s.ring[static_cast<size_t>(interval % throughput_buckets)];
  if (bucket.interval != interval) {
    bucket.interval = interval;
    bucket.outcomes.fill(0);
  }
  ++bucket.outcomes[static_cast<size_t>(r)];
  if (r != execution_result::lost)
    s.duration->Observe(
      fractional_seconds(std::chrono::milliseconds{o.duration_ms}));
}

void prometheus_observer::rescued(const rescued_job& job) {
  std::lock_guard<std::mutex> guard{mtx_};
  const char* reason = job.reason == rescue_reason::expired_callback
                         ? "expired_callback"
                         : job.reason == rescue_reason::deadline_exceeded
                             ? "deadline_exceeded"
                             : "stale_heartbeat";
  rescues_
    .Add({{"queue", queue_label(job.queue)},
          {"kind", kind_label(job.kind)},
          {"reason", reason},
          {"dead_lettered", job.dead_lettered ? "true" : "false"}})
    .Increment();
}

void prometheus_observer::database_error(const char* operation) {
  db_errors_.Add({{"operation", operation}}).Increment();
}

void prometheus_observer::hooks_failed(const std::string& kind,
                                       int failures) {
  hook_failures_.Add({{"kind", kind_label(kind)}})
    .Increment(static_cast<double>(failures));
}

void prometheus_observer::follow_ups_failed(const char* stage) {
  follow_up_failures_.Add({{"stage", stage}}).Increment();
}

void prometheus_observer::slots(const std::string& queue, int running,
                                int concurrency) {
  std::lock_guard<std::mutex> guard{mtx_};
  slots_[queue] = queue_slots{running, concurrency};
  auto& s = series_of(queue);
  s.running->Set(running);
  s.limit->Set(concurrency);
  s.free->Set(std::max(0, concurrency - running));
}

nlohmann::json prometheus_observer::throughput_json() const {
  auto now = current_interval();
  auto first = now - throughput_buckets + 1;
  // queue -> outcome -> counts, oldest first.
  std::map<std::string, std::array<std::vector<int64_t>, result_count>> sums;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& [key, series] : by_kind_) {
      auto& q = sums[key.first];
      for (auto& counts : q)
        if (counts.empty())
          counts.assign(throughput_buckets, 0);
      for (auto& b : series.ring) {
        if (b.interval < first || b.interval > now)
          continue;
        auto at = static_cast<size_t>(b.interval - first);
        for (size_t r = 0; r < result_count; ++r)
          q[r][at] += b.outcomes[r];
      }
    }
  }
  nlohmann::json queues = nlohmann::json::object();
  for (auto& [queue, outcomes] : sums) {
    nlohmann::json q = nlohmann::json::object();
    for (size_t r = 0; r < result_count; ++r)
      q[to_string(static_cast<execution_result>(r))] = outcomes[r];
    queues[queue] = std::move(q);
  }
  return {{"bucket_seconds", throughput_bucket_seconds},
          {"end", (now + 1) * throughput_bucket_seconds},
          {"queues", std::move(queues)}};
}

} // namespace aw
