#pragma once
// The fixture of the deterministic actor tests: CAF's test coordinator
// (virtual time), a stub storage actor that answers from a script and
// records what it is asked, and a job dispatcher the test completes by hand.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/poller.hpp"
#include "messages/error.hpp"

using namespace std::chrono_literals;
using namespace aw;

namespace aw_test {

using time_point = caf::actor_clock::time_point;

/// What the stub storage was asked, and how it answers.
struct storage_script {
  /// Jobs due in the queue; claims take from here.
  int backlog = 0;
  /// Answer claims with ec::database_unavailable while true.
  bool fail_claims = false;
  int64_t next_id = 1;
  /// Each claim's limit and the virtual time it arrived.
  std::vector<int32_t> claim_limits;
  std::vector<time_point> claim_times;
  /// Deadline given to claimed jobs (0: the poller's default).
  int64_t deadline_ms = 0;
  /// Outcomes recorded, in order.
  std::vector<job_outcome> outcomes;
  std::vector<int64_t> finished;
  std::vector<int64_t> released;
  /// Answer heartbeats with ec::database_unavailable while true.
  bool fail_heartbeats = false;
  /// Jobs a heartbeat reports as no longer ours.
  std::vector<int64_t> stolen;
  /// The ids of each heartbeat statement.
  std::vector<std::vector<int64_t>> heartbeats;
  int rescues = 0;
};

/// A storage actor that answers from a script. Cleanup and the schema
/// check are not the poller's business: asking for them fails the test.
inline storage_actor::behavior_type stub_storage(storage_actor::pointer self,
                                          std::shared_ptr<storage_script> s) {
  return {
    [=](claim_atom, const std::string& queue, int32_t limit,
        int64_t default_deadline_ms) -> caf::result<std::vector<claimed_job>> {
      s->claim_limits.push_back(limit);
      s->claim_times.push_back(self->clock().now());
      if (s->fail_claims)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      std::vector<claimed_job> jobs;
      while (s->backlog > 0 && static_cast<int32_t>(jobs.size()) < limit) {
        claimed_job job;
        job.id = s->next_id++;
        job.kind = "noop";
        job.queue = queue;
        job.args = "{}";
        job.attempt = 1;
        job.deadline_ms = s->deadline_ms > 0 ? s->deadline_ms
                                             : default_deadline_ms;
        jobs.push_back(job);
        --s->backlog;
      }
      return jobs;
    },
    [=](finish_atom, const job_outcome& o) -> finish_result {
      s->finished.push_back(o.job_id);
      s->outcomes.push_back(o);
      return finish_result::applied;
    },
    [=](heartbeat_atom, const std::vector<int64_t>& ids)
      -> caf::result<std::vector<int64_t>> {
      s->heartbeats.push_back(ids);
      if (s->fail_heartbeats)
        return aw::make_error(aw::ec::database_unavailable, "stub: down");
      std::vector<int64_t> alive;
      for (auto id : ids)
        if (std::find(s->stolen.begin(), s->stolen.end(), id)
            == s->stolen.end())
          alive.push_back(id);
      return alive;
    },
    [=](rescue_atom) -> std::vector<rescued_job> {
      ++s->rescues;
      return {};
    },
    [=](release_atom, const std::vector<int64_t>& ids) -> int64_t {
      s->released.insert(s->released.end(), ids.begin(), ids.end());
      return static_cast<int64_t>(ids.size());
    },
    [=](cleanup_atom) -> int64_t {
      BOOST_FAIL("the poller must not ask for cleanup");
      return 0;
    },
    [=](check_atom) -> bool {
      BOOST_FAIL("the poller must not run the schema check");
      return false;
    },
    [=](flush_atom) {},
  };
}

/// Holds the jobs it is given until the test completes them.
class manual_dispatcher : public aw::job_dispatcher {
public:
  void dispatch(claimed_job job, cancellation_token cancel,
                completion done) override {
    tokens.push_back(cancel);
    held.emplace_back(std::move(job), std::move(done));
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
  /// The token of every job dispatched, in order.
  std::vector<cancellation_token> tokens;
};

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;
  std::shared_ptr<storage_script> script = std::make_shared<storage_script>();
  std::shared_ptr<manual_dispatcher> dispatcher
    = std::make_shared<manual_dispatcher>();
  storage_actor storage;
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
                            poll_gate_actor gate = {}) {
    aw::poller_config pc;
    pc.queue = "default";
    pc.concurrency = concurrency;
    pc.poll_interval = poll_interval;
    pc.shutdown_drain = drain;
    pc.claimer = storage;
    pc.completers = {storage};
    pc.dispatcher = dispatcher;
    pc.gate = gate;
    auto p = sys->spawn(aw::poller_behavior, pc);
    spawned.push_back(caf::actor_cast<caf::actor>(p));
    return p;
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
