#pragma once
// The fixture of the deterministic actor tests: CAF's test coordinator
// (virtual time), a stub storage actor that answers from a script and
// records what it is asked, and a job runner the test completes by hand.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actor_worker/actors/poller.hpp"
#include "actor_worker/messages/error.hpp"

using namespace std::chrono_literals;
using namespace aw;

namespace aw_test {

using time_point = caf::actor_clock::time_point;

/// The cluster_leader row, shared by the stub storages of several
/// simulated processes: taken when free or expired, renewed by its holder
/// for `ttl` (as storage/sql/nodes.sql:node_refresh does, on virtual time).
struct leader_lease {
  std::string holder;
  time_point expires{};
  std::chrono::milliseconds ttl{2000};
  /// Every change of holder, in order ("" = resigned).
  std::vector<std::string> history;
};

/// What the stub storage was asked, and how it answers.
struct storage_script {
  /// Jobs due in the queue; claims take from here.
  int backlog = 0;
  /// Jobs whose start the poller had recorded, in order.
  std::vector<int64_t> recorded_starts;
  /// Jobs due in the queues named here (claims of other queues take from
  /// `backlog`).
  std::map<std::string, int> queue_backlog;
  /// Answer claims with ec::database_unavailable while true.
  bool fail_claims = false;
  /// The next so many claims find a claim lock stuck: they take nothing
  /// and report it (claim_result::blocked_by).
  int blocked_claims = 0;
  int64_t next_id = 1;
  /// Claimed jobs share one lease per claim (as a lane batch's do) instead
  /// of a lease each (their id).
  bool lane_batches = false;
  int64_t next_batch = 100;
  /// Args of every claimed job.
  std::string args = "{}";
  /// Each claim's limit, byte budget and the virtual time it arrived.
  std::vector<int32_t> claim_limits;
  std::vector<int64_t> claim_bytes;
  std::vector<time_point> claim_times;
  std::vector<std::string> claim_queues;
  /// Whether each claim said handlers stood idle waiting for its jobs.
  std::vector<bool> claim_awaited;
  /// Deadline given to claimed jobs (0: the poller's default).
  int64_t deadline_ms = 0;
  /// Outcomes recorded, in order, and how many finish messages brought
  /// them.
  std::vector<job_outcome> outcomes;
  std::vector<int64_t> finished;
  size_t finish_messages = 0;
  /// Released jobs, and whether each release said they had started.
  std::vector<int64_t> released;
  std::vector<bool> released_started;
  /// Answer heartbeats with ec::database_unavailable while true.
  bool fail_heartbeats = false;
  /// Leases a heartbeat reports as no longer ours.
  std::vector<int64_t> stolen;
  /// The leases of each heartbeat (one per held job).
  std::vector<std::vector<int64_t>> heartbeats;
  /// Jobs an operator asked to cancel (`jobs cancel`), and the job ids of
  /// each question about them.
  std::set<int64_t> cancel_requested;
  std::vector<std::vector<int64_t>> cancel_checks;
  /// Rescue requests so far, and what each reports rescued. While
  /// fail_rescues they are answered with ec::database_unavailable; while
  /// rescue_delay > 0 they are answered that much later (virtual time).
  int rescues = 0;
  std::vector<rescued_job> rescued;
  bool fail_rescues = false;
  std::chrono::milliseconds rescue_delay{0};
  std::vector<caf::typed_response_promise<std::vector<rescued_job>>>
    delayed_rescues;
  /// While claim_delay > 0, claims are answered that much later, with what
  /// is due then (as a statement that runs late would see it).
  std::chrono::milliseconds claim_delay{0};
  std::vector<std::function<void()>> delayed_claims;
  /// Released jobs become due again (the backlog grows by them).
  bool release_to_backlog = false;
  /// Maintenance's requests are answered only while true (the poller must
  /// never make them): what successive cleanups report deleted (then 0),
  /// and how many cleanups and vacuums were asked for.
  bool maintenance = false;
  std::vector<int64_t> cleanup_results;
  int cleanups = 0;
  int vacuums = 0;
  /// Queue-depth samples asked for (metrics).
  int samples = 0;
  /// worker_nodes refreshes (the jobs held at each) and deletions.
  std::vector<int64_t> node_refreshes;
  int leaves = 0;
  /// periodic_schedules as the stub keeps it, by name: a tick is taken
  /// only when it is after the row's last_tick, as the database does.
  std::map<std::string, periodic_row> periodic;
  /// Reads of periodic_schedules, and every tick asked to be enqueued
  /// with the virtual time it came; those taken (a job enqueued).
  int periodic_loads = 0;
  std::vector<periodic_tick> ticks_asked;
  std::vector<time_point> tick_times;
  std::vector<periodic_tick> ticks_enqueued;
  /// Answer periodic requests with ec::database_unavailable while true.
  bool fail_periodic = false;
  /// The leader lease this process competes for, as `worker`; without one
  /// every candidate leads. Refreshes and resigns fail while fail_nodes.
  std::shared_ptr<leader_lease> lease;
  std::string worker = "w1";
  bool fail_nodes = false;
  int resigns = 0;
  /// The queue is paused (queue_controls): claims take nothing and say so.
  bool paused = false;
  /// A cluster-wide limit: at most this many jobs held at once by the
  /// claims (finished jobs give their slot back); 0 = none.
  int global_limit = 0;
  int held_by_limit = 0;
  /// Claims of no jobs (the poller asking whether the queue is paused).
  int probes = 0;
  /// Times the configured limits were written (controls_atom).
  int controls_applied = 0;
};

/// A storage actor that answers from a script. Cleanup and the schema
/// check are not the poller's business: asking for them fails the test
/// (unless the script is set up for maintenance).
inline storage_internal::behavior_type stub_storage(storage_internal::pointer self,
                                          std::shared_ptr<storage_script> s) {
  return {
    [=](started_atom, const std::vector<held_job>& jobs) {
      for (auto& j : jobs)
        s->recorded_starts.push_back(j.id);
    },
    [=](claim_atom, const std::string& queue, int32_t limit, int64_t bytes,
        int64_t default_deadline_ms, bool awaited) -> caf::result<claim_result> {
      s->claim_limits.push_back(limit);
      s->claim_awaited.push_back(awaited);
      s->claim_bytes.push_back(bytes);
      s->claim_times.push_back(self->clock().now());
      s->claim_queues.push_back(queue);
      if (s->fail_claims)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      if (s->blocked_claims > 0) {
        --s->blocked_claims;
        claim_result out;
        out.blocked_by.push_back("priority 0, held by server pid 1");
        return out;
      }
      if (limit == 0)
        ++s->probes;
      if (s->paused) {
        claim_result out;
        out.paused = true;
        return out;
      }
      if (s->global_limit > 0) {
        // As the database's claim: at most the room the limit leaves;
        // `limited` when the limit, not the backlog, cut the claim.
        int room = std::max(0, s->global_limit - s->held_by_limit);
        claim_result out;
        int take = std::min({limit, room, s->backlog});
        for (int i = 0; i < take; ++i) {
          claimed_job job;
          job.id = s->next_id++;
          job.lease = job.id;
          job.kind = "noop";
          job.queue = queue;
          job.args = s->args;
          job.attempt = 1;
          out.jobs.push_back(job);
          --s->backlog;
        }
        s->held_by_limit += take;
        out.limited = room < limit && take == room;
        return out;
      }
      auto take = [=]() {
      claim_result out;
      auto batch = s->lane_batches ? s->next_batch++ : 0;
      int64_t taken_bytes = 0;
      auto in_queue = s->queue_backlog.find(queue);
      int& backlog = in_queue != s->queue_backlog.end() ? in_queue->second
                                                        : s->backlog;
      while (backlog > 0 && static_cast<int32_t>(out.jobs.size()) < limit) {
        claimed_job job;
        job.id = s->next_id;
        job.lease = s->lane_batches ? batch : job.id;
        job.kind = "noop";
        job.queue = queue;
        job.args = s->args;
        job.attempt = 1;
        job.deadline_ms = s->deadline_ms > 0 ? s->deadline_ms
                                             : default_deadline_ms;
        // The byte bound, as the database applies it: at least one job.
        if (!out.jobs.empty()
            && taken_bytes + static_cast<int64_t>(job.bytes()) > bytes) {
          out.byte_bound = true;
          break;
        }
        taken_bytes += static_cast<int64_t>(job.bytes());
        ++s->next_id;
        out.jobs.push_back(job);
        --backlog;
      }
      return out;
      };
      if (s->claim_delay.count() > 0) {
        auto promise = self->make_response_promise<claim_result>();
        s->delayed_claims.push_back(
          [promise, take]() mutable { promise.deliver(take()); });
        self->delayed_send(self, s->claim_delay, flush_atom::value);
        return promise;
      }
      return take();
    },
    [=](finish_atom, const std::vector<job_outcome>& outcomes,
        poller_actor& poller) {
      ++s->finish_messages;
      std::vector<outcome_report> reports;
      for (auto& o : outcomes) {
        s->finished.push_back(o.job_id);
        s->outcomes.push_back(o);
        if (s->global_limit > 0)
          --s->held_by_limit; // the slot frees at the commit
        reports.push_back({o.job_id, o.kind, finish_result::applied});
      }
      self->send(poller, committed_atom::value, std::move(reports));
    },
    [=](heartbeat_atom, const std::vector<int64_t>& leases)
      -> caf::result<std::vector<int64_t>> {
      s->heartbeats.push_back(leases);
      if (s->fail_heartbeats)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      std::vector<int64_t> out;
      for (auto x : leases)
        if (std::find(s->stolen.begin(), s->stolen.end(), x) == s->stolen.end())
          out.push_back(x);
      return out;
    },
    [=](cancel_atom, const std::vector<int64_t>& ids)
      -> std::vector<int64_t> {
      s->cancel_checks.push_back(ids);
      std::vector<int64_t> out;
      for (auto id : ids)
        if (s->cancel_requested.count(id) > 0)
          out.push_back(id);
      return out;
    },
    [=](rescue_atom) -> caf::result<std::vector<rescued_job>> {
      ++s->rescues;
      if (s->fail_rescues)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      if (s->rescue_delay.count() > 0) {
        auto promise = self->make_response_promise<std::vector<rescued_job>>();
        s->delayed_rescues.push_back(promise);
        // A flush is the stub's only message to itself: it answers then.
        self->delayed_send(self, s->rescue_delay, flush_atom::value);
        return promise;
      }
      return s->rescued;
    },
    [=](release_atom, const std::vector<held_job>& jobs,
        bool started) -> int64_t {
      for (auto& j : jobs) {
        s->released.push_back(j.id);
        s->released_started.push_back(started);
      }
      if (s->release_to_backlog)
        s->backlog += static_cast<int>(jobs.size());
      if (s->global_limit > 0)
        s->held_by_limit -= static_cast<int>(jobs.size());
      return static_cast<int64_t>(jobs.size());
    },
    [=](controls_atom) -> std::vector<std::string> {
      ++s->controls_applied;
      return {};
    },
    [=](cleanup_atom) -> int64_t {
      if (!s->maintenance)
        BOOST_FAIL("the poller must not ask for cleanup");
      ++s->cleanups;
      if (s->cleanup_results.empty())
        return 0;
      auto deleted = s->cleanup_results.front();
      s->cleanup_results.erase(s->cleanup_results.begin());
      return deleted;
    },
    [=](vacuum_atom) -> std::vector<std::string> {
      if (!s->maintenance)
        BOOST_FAIL("the poller must not vacuum");
      ++s->vacuums;
      return {};
    },
    [=](node_atom, int64_t held, bool candidate) -> caf::result<bool> {
      if (s->fail_nodes)
        return make_error(ec::database_unavailable, "refresh_node failed");
      s->node_refreshes.push_back(held);
      if (!s->lease)
        return candidate;
      auto& l = *s->lease;
      auto now = self->clock().now();
      if (candidate && (l.holder.empty() || l.holder == s->worker
                        || l.expires < now)) {
        if (l.holder != s->worker)
          l.history.push_back(s->worker);
        l.holder = s->worker;
        l.expires = now + l.ttl;
      }
      return candidate && l.holder == s->worker;
    },
    [=](resign_atom) -> caf::result<bool> {
      if (s->fail_nodes)
        return make_error(ec::database_unavailable, "resign failed");
      ++s->resigns;
      if (!s->lease || s->lease->holder != s->worker)
        return false;
      s->lease->holder.clear();
      s->lease->history.push_back("");
      return true;
    },
    [=](leave_atom) -> bool {
      ++s->leaves;
      return true;
    },
    [=](sample_atom) -> int64_t {
      if (!s->maintenance)
        BOOST_FAIL("the poller must not sample the queues");
      ++s->samples;
      return 0;
    },
    [=](periodic_atom) -> caf::result<std::vector<periodic_row>> {
      ++s->periodic_loads;
      if (s->fail_periodic)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      std::vector<periodic_row> rows;
      for (auto& [name, row] : s->periodic)
        rows.push_back(row);
      return rows;
    },
    [=](periodic_atom, const periodic_tick& tick) -> caf::result<int64_t> {
      s->ticks_asked.push_back(tick);
      s->tick_times.push_back(self->clock().now());
      if (s->fail_periodic)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      auto i = s->periodic.find(tick.name);
      if (i != s->periodic.end() && i->second.last_tick >= tick.tick)
        return int64_t{0};
      auto id = s->next_id++;
      s->periodic[tick.name] = periodic_row{tick.name, tick.spec, tick.tick, id, ""};
      s->ticks_enqueued.push_back(tick);
      return id;
    },
    [=](check_atom) -> bool {
      BOOST_FAIL("the poller must not run the schema check");
      return false;
    },
    [=](flush_atom) {
      // A delayed rescue is due (a promise must be delivered from inside
      // its actor).
      for (auto& promise : s->delayed_rescues)
        promise.deliver(s->rescued);
      s->delayed_rescues.clear();
      auto claims = std::move(s->delayed_claims);
      s->delayed_claims.clear();
      for (auto& answer : claims)
        answer();
    },
  };
}

/// Holds the jobs it is given until the test completes them.
class manual_runner : public aw::job_runner {
public:
  std::optional<job_outcome> start(claimed_job job, const run_context& ctx,
                                   completion done) override {
    tokens.push_back(ctx.cancel);
    started.push_back(job.id);
    held.emplace_back(std::move(job), std::move(done));
    return std::nullopt;
  }

  void abandoned(int64_t id) override {
    abandoned_ids.push_back(id);
  }

  /// Ends the oldest held job with an outcome of `kind`.
  void finish_with(outcome_kind kind, std::string message = {}) {
    if (held.empty())
      return;
    auto [job, done] = std::move(held.front());
    held.erase(held.begin());
    job_outcome o;
    o.job_id = job.id;
    o.kind = kind;
    o.message = std::move(message);
    done(o);
  }

  /// Ends the oldest held job with `o` (its job_id set here).
  void finish_as(job_outcome o) {
    if (held.empty())
      return;
    auto [job, done] = std::move(held.front());
    held.erase(held.begin());
    o.job_id = job.id;
    done(o);
  }

  /// Completes the `n` oldest held jobs successfully.
  void complete(size_t n) {
    for (size_t i = 0; i < n && !held.empty(); ++i) {
      auto [job, done] = std::move(held.front());
      held.erase(held.begin());
      job_outcome o;
      o.job_id = job.id;
      done(o);
    }
  }

  std::vector<std::pair<claimed_job, completion>> held;
  /// The token of every job started, in order.
  std::vector<cancellation_token> tokens;
  /// The ids of the jobs started, in order.
  std::vector<int64_t> started;
  std::vector<int64_t> abandoned_ids;
};

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<storage_script> script = std::make_shared<storage_script>();
  std::shared_ptr<manual_runner> dispatcher
    = std::make_shared<manual_runner>();
  storage_actor storage;
  /// Storage actors a poller spawned after add_completer() records
  /// outcomes and claims on besides `storage`, in this order.
  std::vector<storage_actor> more_completers;
  std::vector<caf::actor> spawned;

  fixture() {
    cfg.set("scheduler.policy", caf::atom("testing"));
    cfg.set("logger.verbosity", caf::atom("quiet"));
    // The actors log their errors; tests provoke plenty. AW_TEST_LOG=1
    // shows them.
    if (std::getenv("AW_TEST_LOG") == nullptr)
      spdlog::set_level(spdlog::level::off);
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
    storage = sys->spawn(stub_storage, script);
    spawned.push_back(caf::actor_cast<caf::actor>(storage));
  }

  ~fixture() {
    // ~actor_system waits for every actor: stop them and drain the mailboxes.
    dispatcher->held.clear();
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched->run();
  }

  poller_actor spawn_poller(int concurrency,
                            std::chrono::milliseconds poll_interval = 1s,
                            std::chrono::milliseconds drain = 2s,
                            poll_gate_actor gate = {},
                            int local_queue_size = 1000,
                            int64_t local_queue_bytes = int64_t{64} << 20,
                            std::string queue = "default") {
    aw::poller_config pc;
    pc.queue = std::move(queue);
    pc.concurrency = concurrency;
    pc.local_queue_size = local_queue_size;
    pc.local_queue_bytes = local_queue_bytes;
    pc.poll_interval = poll_interval;
    pc.shutdown_drain = drain;
    pc.abandon_grace = 1s;
    pc.claimer = storage;
    pc.completers = {storage};
    pc.completers.insert(pc.completers.end(), more_completers.begin(),
                         more_completers.end());
    pc.runner = dispatcher;
    pc.gate = gate;
    auto p = sys->spawn(aw::poller_behavior, pc);
    spawned.push_back(caf::actor_cast<caf::actor>(p));
    return p;
  }

  /// A further stub storage actor (on a script of its own) that pollers
  /// spawned from now on claim on and record outcomes with.
  std::shared_ptr<storage_script> add_completer() {
    auto other = std::make_shared<storage_script>();
    more_completers.push_back(sys->spawn(stub_storage, other));
    spawned.push_back(caf::actor_cast<caf::actor>(more_completers.back()));
    return other;
  }

  /// Runs every message that is ready, without moving the clock.
  void run() {
    sched->run();
  }

  /// Moves virtual time forward by `d`, running what becomes due.
  void advance(std::chrono::milliseconds d) {
    sched->advance_time(d);
    sched->run();
  }

  time_point now() {
    return sched->clock().now();
  }

  /// Jobs handed to executors and not finished yet.
  size_t running() const {
    return dispatcher->held.size();
  }
};

} // namespace aw_test
