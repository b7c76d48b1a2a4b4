#pragma once
// The node's observer for /metrics and the health probes: counts what the
// actors report in prometheus-cpp metrics (Prometheus's naming: one
// `actor_worker_` prefix, base units, `_total` counters) and keeps the
// node's health for /readyz.
//
// Labels are bounded: queue (this node's queues, plus the first
// max_metric_queues other queues met in samples and rescues; any further
// queue, which SQL can insert by the thousand, is "other"), kind (this
// node's kinds; any other kind, met only in rescues of other nodes' jobs,
// is "other"), outcome, state, operation. Never a job id, args, error text
// or attempt.
//
// Metrics (docs/operations.md documents each):
//   actor_worker_jobs_started_total{queue,kind}                counter
//   actor_worker_job_executions_total{queue,kind,outcome}      counter
//   actor_worker_jobs_rescued_total{queue,kind,reason}         counter
//   actor_worker_job_duration_seconds{queue,kind}              histogram
//   actor_worker_job_queue_wait_seconds{queue}                 histogram
//   actor_worker_claim_batch_size{queue}                       histogram
//   actor_worker_queue_jobs{queue,state}                       gauge
//   actor_worker_queue_oldest_job_age_seconds{queue}           gauge
//   actor_worker_dead_letter_jobs{queue}                       gauge
//   actor_worker_queue_unserved_jobs{queue}                    gauge
//   actor_worker_jobs_running{queue}                           gauge
//   actor_worker_queue_concurrency_limit{queue}                gauge
//   actor_worker_queue_free_slots{queue}                       gauge
//   actor_worker_database_errors_total{operation}              counter
//   actor_worker_hook_failures_total{kind}                     counter
//   actor_worker_follow_up_failures_total{stage}               counter
//   actor_worker_database_up{database}                         gauge 0/1
//   actor_worker_ready                                         gauge 0/1
//   actor_worker_leader{database}                              gauge 0/1
//   actor_worker_build_info{version}                           gauge 1

#include <array>
#include <atomic>
#include <chrono>
#include <optional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/observer.hpp"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <class T>
class Family;
} // namespace prometheus

namespace aw {

/// What /readyz answers.
struct readiness {
  /// True when the node is ready: database reachable, schema compatible, not draining.
  bool ready = false;
  /// Why not ready: "database unreachable", "schema out of date", ...
  std::vector<std::string> reasons;
  /// {"ready": ..., "database": ..., "schema": ..., "draining": ...,
  /// "reasons": [...]}.
  nlohmann::json to_json() const;
};

/// The latest queue sample, as the dashboard shows it.
struct queue_snapshot {
  /// Every queue's jobs by state.
  queue_samples queues;
  /// When it was taken; nothing before the first sample.
  std::optional<std::chrono::system_clock::time_point> taken;
};

/// This node's handler slots of one queue.
struct queue_slots {
  /// Handlers of the queue running now on this node.
  int running = 0;
  /// The queue's concurrency on this node.
  int concurrency = 0;
};

/// The observer behind /metrics, /readyz and the dashboard's node data: counts what the actors report in prometheus-cpp metrics with bounded labels.
class prometheus_observer final
  : public observer,
    public std::enable_shared_from_this<prometheus_observer> {
public:
  /// The throughput ring: outcomes recorded on this node per interval of
  /// this many seconds, for this many intervals (the last 10 minutes).
  static constexpr int throughput_bucket_seconds = 10;
  /// How many intervals the throughput ring keeps.
  static constexpr int throughput_buckets = 60;

  /// `kinds`: the kinds this node runs (the label values allowed for
  /// `kind`); `queues`: the queues it serves; `version`: for
  /// actor_worker_build_info. The series of these queues and kinds exist
  /// from the start at 0, so rate() and the alert rules see their first
  /// increase. `databases`: the node's databases ("default" first: the
  /// one this observer's own health calls are about); each has its
  /// database_up and leader series, labelled `database`.
  /// `max_other_queues`: queues outside `queues` that get their own
  /// `queue` label (the first met); later ones are labelled "other".
  prometheus_observer(std::vector<std::string> kinds,
                      std::vector<std::string> queues, std::string version,
                      std::vector<std::string> databases = {defaults::database_name},
                      int max_other_queues = defaults::max_metric_queues);
  ~prometheus_observer() override;

  /// The observer the actors of database `name` (one of the constructor's)
  /// report to: every call goes to this one, the health calls
  /// (database_reachable, schema_checked, leadership, sampled) to that
  /// database's health. Lives as long as this observer's owners hold it.
  std::shared_ptr<observer> for_database(const std::string& name);

  /// Every metric in the Prometheus text format (version 0.0.4).
  std::string scrape() const;

  /// The node's readiness: database reachable, schema compatible, not
  /// draining.
  readiness ready() const;

  /// The readiness of database `name` alone (reachable, schema compatible;
  /// the node not draining), for the dashboard's view of one database;
  /// nothing when this node works with no queue or schedule there.
  std::optional<readiness> ready_of(const std::string& name) const;

  /// The latest sample of the queues (the same numbers /metrics exports).
  queue_snapshot latest_sample() const;

  /// The latest sample of database `name`'s queues: its leader's, taken
  /// only while this node leads that database (nothing taken otherwise, or
  /// when the node does not work with it).
  queue_snapshot latest_sample(const std::string& name) const;

  /// This node's slots by queue, as last reported.
  std::map<std::string, queue_slots> slots_by_queue() const;

  /// The outcomes this node recorded per queue over the last
  /// throughput_buckets intervals, oldest first:
  /// {"bucket_seconds": 10, "end": UNIX_SECONDS (the end of the newest,
  /// current interval), "queues": {"q": {"completed": [..], "retried":
  /// [..], "dead_lettered": [..], "cancelled": [..], "snoozed": [..],
  /// "parked": [..], "lost": [..]}}}. Kept in memory (a ring per queue
  /// and kind), so a restarted node starts from zero.
  nlohmann::json throughput_json() const;

  // -- observer ----------------------------------------------------------------

  void database_reachable(bool up) override;
  void schema_checked(bool compatible) override;
  void draining() override;
  void leadership(bool leader) override;
  bool wants_wait_times() const override {
    return true;
  }
  void claimed(const std::string& queue, size_t jobs) override;
  void started(const std::string& queue, const std::string& kind,
               double wait_seconds) override;
  void recorded(const job_outcome& outcome, execution_result r) override;
  void rescued(const rescued_job& job) override;
  void database_error(const char* operation) override;
  void hooks_failed(const std::string& kind, int failures) override;
  void follow_ups_failed(const char* stage) override;
  void slots(const std::string& queue, int running, int concurrency) override;
  void sampled(const queue_samples& samples) override;

private:
  static constexpr size_t result_count
    = static_cast<size_t>(execution_result::lost) + 1;

  /// One interval of the throughput ring.
  struct throughput_bucket {
    /// unix seconds / throughput_bucket_seconds of the interval; -1: none.
    int64_t interval = -1;
    std::array<uint32_t, result_count> outcomes{};
  };

  /// The series of one (queue, kind).
  struct kind_series {
    prometheus::Counter* started = nullptr;
    std::array<prometheus::Counter*, result_count> executions{};
    prometheus::Histogram* duration = nullptr;
    /// Outcomes per interval, indexed by interval % throughput_buckets.
    std::array<throughput_bucket, throughput_buckets> ring{};
  };

  /// The series of one queue on this node.
  struct queue_series {
    prometheus::Histogram* wait = nullptr;
    prometheus::Histogram* claim = nullptr;
    prometheus::Gauge* running = nullptr;
    prometheus::Gauge* limit = nullptr;
    prometheus::Gauge* free = nullptr;
  };

  /// Orders (queue, kind) keys and looks them up by views, so a lookup
  /// copies no string.
  struct pair_less {
    using is_transparent = void;
    using view = std::pair<std::string_view, std::string_view>;
    static view as_view(const std::pair<std::string, std::string>& p) {
      return {p.first, p.second};
    }
    static const view& as_view(const view& v) {
      return v;
    }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      return as_view(a) < as_view(b);
    }
  };

  /// The label value for `kind`: itself when this node runs it, else
  /// "other".
  const std::string& kind_label(const std::string& kind) const;
  /// The label value for `queue` (under mtx_): itself when this node
  /// serves it or it already has its label, or while fewer than
  /// max_other_queues_ others have theirs; else "other".
  const std::string& queue_label(const std::string& queue);
  /// Sets the sampled gauges of label `queue` to `totals` (under mtx_).
  void export_sample(const std::string& queue, const queue_sample& totals);
  /// Deletes the sampled series of label `queue` (under mtx_).
  void drop_sample(const std::string& queue);
  /// The sum of every database's sample of label `queue` (under mtx_):
  /// a label ("other", or a queue name used in two databases) may gather
  /// several.
  queue_sample total_of(const std::string& queue) const;
  kind_series& series_of(const std::string& queue, const std::string& kind);
  queue_series& series_of(const std::string& queue);

  std::shared_ptr<prometheus::Registry> registry_;
  std::set<std::string, std::less<>> kinds_;
  std::string other_kind_ = "other";
  /// The queues this node serves: always labelled by name.
  std::set<std::string, std::less<>> own_queues_;
  /// Under mtx_: the other queues labelled by name so far (never forgotten,
  /// so a series keeps its label); at most max_other_queues_.
  std::set<std::string, std::less<>> other_queues_;
  size_t max_other_queues_;
  std::string other_queue_ = "other";

  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Counter>& executions_;
  prometheus::Family<prometheus::Counter>& rescues_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Histogram>& wait_;
  prometheus::Family<prometheus::Histogram>& claim_size_;
  prometheus::Family<prometheus::Gauge>& queue_jobs_;
  prometheus::Family<prometheus::Gauge>& oldest_age_;
  prometheus::Family<prometheus::Gauge>& dead_letters_;
  prometheus::Family<prometheus::Gauge>& unserved_;
  prometheus::Family<prometheus::Gauge>& running_;
  prometheus::Family<prometheus::Gauge>& limit_;
  prometheus::Family<prometheus::Gauge>& free_slots_;
  prometheus::Family<prometheus::Counter>& db_errors_;
  prometheus::Family<prometheus::Counter>& hook_failures_;
  prometheus::Family<prometheus::Counter>& follow_up_failures_;
  prometheus::Family<prometheus::Gauge>& database_up_;
  prometheus::Gauge& ready_;
  prometheus::Family<prometheus::Gauge>& leader_;

  /// One database's health: each has its own atomics, so a statement's
  /// report takes no lock.
  struct database_health {
    std::string name;
    std::atomic<int> reachable{0}; // 0 unknown, 1 up, -1 down
    std::atomic<int> schema{0};    // 0 not checked yet, 1 ok, -1 outdated
    prometheus::Gauge* up = nullptr;
    prometheus::Gauge* leader = nullptr;
    /// Under mtx_: its last sample summed by queue label (a label missing
    /// from the next one is set to 0, not left at its old depth), and the
    /// sample as read (every queue by name, for the dashboard).
    std::map<std::string, queue_sample> sampled_labels;
    queue_snapshot latest;
  };
  class database_view;

  database_health& health_of(const std::string& name);
  /// Database `name`'s entry, or null when this node does not work with it.
  const database_health* find_health(const std::string& name) const;
  /// Adds why `h` is not ready to `r` (naming the database when the node
  /// has several).
  void add_reasons(const database_health& h, readiness& r) const;
  void reachable(database_health& h, bool up);
  void leadership(database_health& h, bool leader);
  void sampled(database_health& h, const queue_samples& samples);

  mutable std::mutex mtx_;
  std::map<std::pair<std::string, std::string>, kind_series, pair_less>
    by_kind_;
  std::map<std::string, queue_series, std::less<>> by_queue_;
  std::map<std::string, queue_slots> slots_;
  /// The databases, in the constructor's order (fixed after it).
  std::vector<std::unique_ptr<database_health>> health_;

  std::atomic<bool> draining_{false};
};

} // namespace aw
