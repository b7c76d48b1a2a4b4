#include "sim/simulation.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <set>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/local_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actor_worker/actors/supervisor.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/atoms.hpp"

#include "sim/follow_up_plan.hpp"
#include "sim/model_backend.hpp"
#include "sim/sim_runner.hpp"
#include "sim/trace.hpp"

namespace aw_sim {

namespace {

using namespace std::chrono_literals;

// The worker's timing in the simulation: short, so that a few minutes of
// virtual time see many heartbeats, rescues and retries; the reclaim
// window is the smallest the configuration allows (3 heartbeats).
constexpr auto heartbeat = 1000ms;
constexpr auto reclaim_window = 3000ms;
constexpr auto poll_interval = 500ms;
constexpr auto shutdown_drain = 1000ms;
constexpr auto queue_deadline = 3000ms;
constexpr int max_retries = 3;
/// Chaos decisions are taken this often (virtual time).
constexpr int64_t chaos_tick_ms = 250;
/// A crashed node's jobs must be taken back within this: the leader lease
/// may have to expire first (a window), then the rescue needs the node
/// silent for a window, and each runs on heartbeat rounds.
constexpr int64_t crash_bound_ms
  = 2 * reclaim_window.count() + 4 * heartbeat.count();

/// After an outage the runtime's loops retry on their backoff, which
/// grows to defaults::backoff_max: a crash's bound counts from then.
constexpr int64_t after_outage_ms = aw::defaults::backoff_max.count();

/// One slot of the cluster: a node that crashes and comes back as a new
/// process (a new worker id).
struct node_slot {
  int index = 0;
  int generation = 0;
  std::string worker;
  caf::actor supervisor;
  bool up = false;
  /// Down: when it comes back (virtual ms).
  int64_t restart_at = 0;
  /// Its connections fail until then (virtual ms).
  int64_t partitioned_until = 0;
};

std::string describe(const model_change& c) {
  using what = model_change::what;
  auto job = "job " + std::to_string(c.job);
  switch (c.kind) {
    case what::enqueued:
      return "enqueue " + job + " " + to_string(c.state);
    case what::follow_up:
      return "follow-up " + job + " of transition "
             + std::to_string(c.transition);
    case what::claimed:
      return c.worker + " claims " + job + " lease " + std::to_string(c.lease)
             + " (t" + std::to_string(c.transition) + ")";
    case what::started:
      return "start of " + job + " recorded, lease " + std::to_string(c.lease);
    case what::node_seen:
      return c.worker + " refreshes its row";
    case what::node_left:
      return c.worker + " leaves";
    case what::lease_heartbeated:
      return c.worker + " heartbeats lease " + std::to_string(c.lease);
    case what::taken_back:
      return c.worker + "'s heartbeat takes back lease "
             + std::to_string(c.lease) + " (a claim it never heard of)";
    case what::transitioned: {
      const char* by = c.by == model_change::cause::outcome
                         ? "outcome"
                         : c.by == model_change::cause::rescue ? "rescue"
                                                               : "release";
      return job + " -> " + to_string(c.state) + " by " + by + " (lease "
             + std::to_string(c.presented_lease != 0 ? c.presented_lease
                                                     : c.lease)
             + ", errors " + std::to_string(c.errors_after) + ", t"
             + std::to_string(c.transition) + ")";
    }
  }
  return "?";
}

class simulator {
public:
  explicit simulator(const sim_options& opts)
    : opts_(opts), rng_(opts.seed), trace_(opts.trace_tail) {
    cfg_.set("scheduler.policy", caf::atom("testing"));
    cfg_.set("logger.verbosity", caf::atom("quiet"));
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
    model_settings settings;
    settings.max_retries = max_retries;
    settings.reclaim_window_ms = reclaim_window.count();
    db_ = std::make_shared<model_database>(settings,
                                           [this] { return now() + skew_ms_; });
    db_->mutations = opts.mutations;
    checker_ = std::make_unique<invariants>(*db_, crash_bound_ms);
    db_->observer = [this](const model_change& c) {
      trace_.add(now(), describe(c), c.kind == model_change::what::node_seen
                     || c.kind == model_change::what::lease_heartbeated);
      checker_->on_change(c);
    };
  }

  ~simulator() {
    for (auto& n : nodes_)
      if (n.supervisor)
        caf::anon_send_exit(n.supervisor, caf::exit_reason::kill);
    for (auto& a : retired_)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    if (hooks_)
      caf::anon_send_exit(hooks_, caf::exit_reason::kill);
    sched_->run();
    // Timers of dead actors go nowhere; fire them so nothing waits.
    while (sched_->has_pending_timeout()) {
      sched_->trigger_timeouts();
      sched_->run();
    }
  }

  sim_result run() {
    // The cluster's shape, from the seed.
    pool_size_ = static_cast<int>(between(1, 2));
    concurrency_ = static_cast<int>(between(1, 4));
    local_queue_size_ = static_cast<int>(between(1, 8));
    spawn_hooks();
    for (int i = 0; i < opts_.jobs; ++i)
      enqueue_random();
    nodes_.resize(static_cast<size_t>(opts_.nodes));
    for (int i = 0; i < opts_.nodes; ++i) {
      nodes_[i].index = i;
      start_node(nodes_[i]);
    }
    int64_t heal_at = opts_.chaos_ms;
    int64_t end_at = heal_at + opts_.heal_ms;
    int64_t next_tick = chaos_tick_ms;
    bool healing = false;
    while (!checker_->broken()) {
      run_ready();
      if (checker_->broken())
        break;
      auto t = now();
      if (!healing && t >= heal_at) {
        healing = true;
        heal();
      }
      if (healing && all_final())
        break;
      if (t >= end_at)
        break;
      while (t >= next_tick) {
        if (!healing)
          chaos();
        next_tick += chaos_tick_ms;
      }
      for (auto& n : nodes_)
        if (!n.up && n.restart_at <= t)
          start_node(n);
      // Time moves only when nothing is ready, by a step the seed picks:
      // timers due in it fire in order.
      sched_->advance_time(std::chrono::milliseconds{between(1, 120)});
    }
    if (!checker_->broken())
      checker_->check_end();
    sim_result out;
    out.broken = checker_->broken();
    out.steps = steps_;
    out.violation_step = violation_step_;
    out.trace_hash = trace_.hash();
    out.trace_lines = trace_.lines();
    out.trace_tail.assign(trace_.last().begin(), trace_.last().end());
    out.virtual_ms = now();
    out.faults = faults_;
    out.jobs = db_->jobs().size();
    for (auto& [id, j] : db_->jobs())
      if (j.state == model_state::completed)
        ++out.completed;
    return out;
  }

private:
  // -- randomness (all of it from the seed) ----------------------------------

  int64_t between(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  bool chance(double p) {
    return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }

  // -- time and trace ------------------------------------------------------------

  int64_t now() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
             sched_->clock().now().time_since_epoch())
      .count();
  }

  void record(const std::string& line) {
    trace_.add(now(), line);
  }

  void fault(const std::string& line) {
    ++faults_;
    record("FAULT " + line);
  }

  // -- the steps -------------------------------------------------------------------

  /// Whether `job` is a storage actor (it waits while the database is
  /// slow).
  static bool is_storage(caf::resumable* job) {
    auto actor = dynamic_cast<caf::local_actor*>(job);
    return actor != nullptr && std::strcmp(actor->name(), "storage") == 0;
  }

  /// Runs every ready actor, one at a time, in an order the seed picks.
  /// While the database is slow, storage actors wait: their statements
  /// take that long (their callers' timeouts run meanwhile).
  void run_ready() {
    while (sched_->has_job() && !checker_->broken()) {
      auto& jobs = sched_->jobs;
      std::vector<size_t> runnable;
      bool slow = now() < slow_until_;
      for (size_t i = 0; i < jobs.size(); ++i)
        if (!slow || !is_storage(jobs[i]))
          runnable.push_back(i);
      if (runnable.empty())
        return;
      auto k = runnable[static_cast<size_t>(
        between(0, static_cast<int64_t>(runnable.size()) - 1))];
      if (k != 0) {
        auto job = jobs[k];
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(k));
        jobs.push_front(job);
      }
      sched_->run_once();
      ++steps_;
      checker_->check_step(now());
      if (checker_->broken()) {
        violation_step_ = steps_;
        return;
      }
      // Now and then a message is slow: time moves before the rest runs.
      if (chance(0.01))
        sched_->advance_time(std::chrono::milliseconds{between(1, 40)});
    }
  }

  bool all_final() const {
    for (auto& [id, j] : db_->jobs())
      if (!is_final(j.state))
        return false;
    return true;
  }

  // -- the cluster ---------------------------------------------------------------

  void spawn_hooks() {
    auto* self_sim = this;
    hooks_ = caf::actor_cast<caf::actor>(sys_->spawn(
      [self_sim](aw::hook_dispatcher_actor::pointer)
        -> aw::hook_dispatcher_actor::behavior_type {
        return {
          [self_sim](aw::job_event& e) {
            self_sim->record(std::string{"hook "} + aw::to_string(e.type));
            self_sim->checker_->on_hook(e);
          },
        };
      }));
  }

  aw::runtime_config node_config(const node_slot& n) {
    aw::runtime_config rc;
    rc.database.url = "model://simulation";
    // No LISTEN: the model has no notifications; pollers poll.
    rc.database.pooler = "transaction";
    rc.database.pool_size = pool_size_;
    rc.worker.node = "n" + std::to_string(n.index);
    rc.worker.poll_interval = poll_interval;
    rc.worker.max_retries = max_retries;
    rc.worker.shutdown_drain = shutdown_drain;
    rc.worker.heartbeat_interval = heartbeat;
    rc.worker.reclaim_window = reclaim_window;
    rc.worker.maintenance_interval = 5000ms;
    rc.worker.local_queue_size = local_queue_size_;
    aw::queue_config q;
    q.name = "default";
    q.concurrency = concurrency_;
    q.deadline = queue_deadline;
    rc.queues = {q};
    return rc;
  }

  void start_node(node_slot& n) {
    n.worker = "n" + std::to_string(n.index) + "g" + std::to_string(n.generation++);
    aw::supervisor_config sc;
    sc.config = node_config(n);
    sc.worker_id = n.worker;
    sc.host = "sim";
    sc.version = "sim";
    auto worker = n.worker;
    sc.runner = std::make_shared<sim_runner>(
      worker, [this](const aw::claimed_job& job) { return plan(job); },
      [this](const std::string& line) { record(line); });
    sc.hooks = caf::actor_cast<aw::hook_dispatcher_actor>(hooks_);
    auto index = n.index;
    sc.make_backend = [this, index, worker]() -> std::shared_ptr<aw::storage::backend> {
      return std::make_shared<model_backend>(
        db_, worker, [](const aw::job_event& e) { return follow_ups_of(e); },
        [this, index, worker](const char* call) {
          return call_fault_of(index, worker, call);
        });
    };
    n.supervisor = caf::actor_cast<caf::actor>(
      sys_->spawn(aw::supervisor_behavior, std::move(sc)));
    n.up = true;
    record(n.worker + " starts");
  }

  call_fault call_fault_of(int index, const std::string& worker,
                           const char* call) {
    auto t = now();
    // A crashed process is gone at once: whatever its actors still had in
    // their mailboxes never reaches the database.
    if (crashed_.count(worker) > 0)
      return call_fault::lost_connection;
    if (t < hung_until_ || t < nodes_[static_cast<size_t>(index)].partitioned_until)
      return call_fault::lost_connection;
    if (healing_)
      return call_fault::none;
    if (chance(opts_.faults.lost_connection)) {
      fault(worker + " loses its connection before " + call);
      return call_fault::lost_connection;
    }
    if (chance(opts_.faults.lost_reply)) {
      fault(worker + " loses the reply of " + call + " (committed)");
      return call_fault::lost_reply;
    }
    return call_fault::none;
  }

  // -- jobs and handlers ------------------------------------------------------------

  void enqueue_random() {
    aw::enqueue_request r;
    r.kind = chance(0.4) ? "chain" : "plain";
    r.args = {{"n", between(0, 1000000)}};
    r.options.priority = static_cast<int>(between(-2, 2));
    if (chance(0.3))
      r.options.delay = std::chrono::milliseconds{between(100, 10000)};
    if (chance(0.5))
      r.options.max_attempts = static_cast<int>(between(1, 4));
    if (chance(0.2))
      r.options.ordering_key = chance(0.5) ? "a" : "b";
    if (chance(0.2))
      r.options.deadline = std::chrono::milliseconds{between(500, 5000)};
    if (chance(0.1)) {
      // A unique job, enqueued twice: the duplicate inserts nothing while
      // the first is live or completed.
      r.options.unique = aw::unique_options{};
      db_->enqueue(r);
    }
    db_->enqueue(r);
  }

  handler_plan plan(const aw::claimed_job& job) {
    using ending = handler_plan::ending;
    handler_plan p;
    p.duration_ms = between(5, 1500);
    auto roll = between(0, 99);
    if (healing_ || !opts_.faults.bad_handlers) {
      // Ordinary handlers: they complete or fail, and end.
      p.duration_ms = between(5, 500);
      p.end = roll < 85 ? ending::complete : ending::fail;
      if (!healing_ && roll >= 85 && roll < 90)
        p.end = ending::fail_terminal;
      return p;
    }
    if (roll < 50) {
      p.end = ending::complete;
    } else if (roll < 60) {
      p.end = ending::fail;
    } else if (roll < 63) {
      p.end = ending::fail_terminal;
    } else if (roll < 68) {
      p.end = ending::retry_after;
      p.delay_ms = between(200, 3000);
    } else if (roll < 73) {
      p.end = ending::snooze;
      p.delay_ms = between(200, 2000);
    } else if (roll < 77) {
      p.end = ending::cancel;
    } else if (roll < 82) {
      p.end = ending::wait_for_callback;
      p.delay_ms = between(500, 5000);
    } else if (roll < 87) {
      p.end = ending::hang;
    } else {
      // Overruns its deadline, then returns (or is given up first).
      p.end = ending::complete;
      p.duration_ms = job.deadline_ms + between(1, 2500);
    }
    return p;
  }

  // -- faults ------------------------------------------------------------------------

  node_slot& random_node() {
    return nodes_[static_cast<size_t>(between(0, opts_.nodes - 1))];
  }

  bool none_up_but(const node_slot& n) const {
    for (auto& other : nodes_)
      if (&other != &n && other.up)
        return false;
    return true;
  }

  void chaos() {
    auto& f = opts_.faults;
    auto t = now();
    if (chance(0.08))
      enqueue_random();
    if (chance(f.crash)) {
      auto& n = random_node();
      if (n.up) {
        fault(n.worker + " crashes");
        crashed_.insert(n.worker);
        caf::anon_send_exit(n.supervisor, caf::exit_reason::kill);
        retired_.push_back(n.supervisor);
        n.supervisor = nullptr;
        n.up = false;
        n.restart_at = t + between(500, 10000);
        checker_->on_crash(n.worker, t);
        if (none_up_but(n))
          checker_->hold_crash_deadlines(n.restart_at);
      }
    }
    if (chance(f.stop)) {
      auto& n = random_node();
      if (n.up) {
        fault(n.worker + " stops gracefully");
        caf::anon_send(n.supervisor, aw::stop_atom::value);
        retired_.push_back(n.supervisor);
        n.supervisor = nullptr;
        n.up = false;
        n.restart_at = t + between(2000, 10000);
        if (none_up_but(n))
          checker_->hold_crash_deadlines(n.restart_at);
      }
    }
    if (chance(f.partition)) {
      auto& n = random_node();
      n.partitioned_until = t + between(1000, 15000);
      fault(n.worker + " loses the database until "
            + std::to_string(n.partitioned_until));
      checker_->hold_crash_deadlines(n.partitioned_until + after_outage_ms);
    }
    if (chance(f.hung_database)) {
      hung_until_ = t + between(500, 8000);
      fault("the database hangs until " + std::to_string(hung_until_));
      checker_->hold_crash_deadlines(hung_until_ + after_outage_ms);
    }
    if (chance(f.slow_database)) {
      slow_until_ = t + between(200, 5000);
      fault("the database is slow until " + std::to_string(slow_until_));
      checker_->hold_crash_deadlines(slow_until_ + after_outage_ms);
    }
    if (chance(f.clock_jump)) {
      auto jump = between(100, 2 * reclaim_window.count());
      skew_ms_ += jump;
      fault("the database clock jumps " + std::to_string(jump) + " ms ahead");
    }
    if (chance(f.cancel_request) && !db_->jobs().empty()) {
      auto id = between(1, static_cast<int64_t>(db_->jobs().size()));
      db_->request_cancel(id);
      fault("an operator asks to cancel job " + std::to_string(id));
    }
  }

  /// The faults end: connections come back, every node is up.
  void heal() {
    healing_ = true;
    hung_until_ = 0;
    slow_until_ = 0;
    for (auto& n : nodes_) {
      n.partitioned_until = 0;
      if (!n.up)
        start_node(n);
    }
    record("HEAL");
  }

  sim_options opts_;
  std::mt19937_64 rng_;
  trace trace_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  std::shared_ptr<model_database> db_;
  std::unique_ptr<invariants> checker_;
  caf::actor hooks_;
  std::vector<node_slot> nodes_;
  /// Workers whose process crashed.
  std::set<std::string> crashed_;
  /// Supervisors of crashed or stopped nodes (killed at the end).
  std::vector<caf::actor> retired_;
  /// The database server's clock runs this far ahead (ms).
  int64_t skew_ms_ = 0;
  /// Every call fails until then (virtual ms).
  int64_t hung_until_ = 0;
  /// Every statement waits until then (virtual ms).
  int64_t slow_until_ = 0;
  bool healing_ = false;
  uint64_t steps_ = 0;
  uint64_t violation_step_ = 0;
  uint64_t faults_ = 0;
  // The seed's shape of the cluster.
  int pool_size_ = 1;
  int concurrency_ = 2;
  int local_queue_size_ = 4;
};

} // namespace

sim_result simulate(const sim_options& opts) {
  simulator sim(opts);
  return sim.run();
}

} // namespace aw_sim
