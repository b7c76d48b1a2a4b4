#include "actor_worker/actors/executor.hpp"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/actors/job_log.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"

namespace aw {

namespace {

/// The run's job, for a log line about it.
job_ref ref_of(const executor_run& run) {
  return {run.job_id, run.kind, run.queue, run.attempt};
}

/// Arms timers of asynchronous handlers from any thread; they fire on the
/// executor as timer_atom messages.
class executor_timer_service : public timer_service {
public:
  executor_timer_service(executor_internal self,
                         std::shared_ptr<executor_state::timer_table> table)
    : self_(caf::actor_cast<caf::weak_actor_ptr>(self)),
      table_(std::move(table)) {
    // nop
  }

  void after(uint64_t run, std::chrono::milliseconds delay,
             std::function<void()> fn) override {
    auto strong = caf::actor_cast<executor_internal>(self_.lock());
    if (!strong)
      return;
    uint64_t id;
    {
      std::lock_guard<std::mutex> guard{table_->mtx};
      id = ++table_->next_id;
      table_->pending.emplace(id, std::move(fn));
    }
    caf::delayed_anon_send(strong, delay, timer_atom::value, run, id);
  }

private:
  caf::weak_actor_ptr self_;
  std::shared_ptr<executor_state::timer_table> table_;
};

/// The run ended (or was given up on): gives the outcome to the poller,
/// which frees the slot and passes the outcome on to storage.
void finish(executor_pointer self, job_outcome outcome) {
  auto& st = self->state;
  auto& run = st.current;
  st.busy = false;
  st.running_token->reset();
  auto id = run.job_id;
  if (outcome.record == outcome_record::stale) {
    // A transactional handler's transaction found the lease gone and
    // rolled back, its writes with it.
    log_job(spdlog::level::warn, ref_of(run),
            "job {}: {}: its transactional handler's transaction rolled "
            "back, because the run is no longer this worker's (released, "
            "rescued or claimed again); nothing was recorded",
            id, to_string(ec::stale_run));
    self->send(st.cfg.poller, done_atom::value, id, false, job_outcome{});
    return;
  }
  // A committed outcome is in the database with the handler's writes,
  // guarded by the lease: it stands, whatever happened since.
  bool committed = outcome.record == outcome_record::committed;
  if (run.lost && !committed) {
    log_job(spdlog::level::warn, ref_of(run),
            "job {}: handler returned after the job stopped being ours ({}); "
            "its outcome is not recorded",
            id, run.cancel.reason());
    self->send(st.cfg.poller, done_atom::value, id, false, job_outcome{});
    return;
  }
  outcome.job_id = id;
  outcome.lease = run.lease;
  outcome.attempt = run.attempt;
  outcome.observed = run.observed;
  outcome.job_kind = std::move(run.kind);
  outcome.queue = std::move(run.queue);
  if (outcome.kind != outcome_kind::abandoned) {
    outcome.duration_ms
      = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - run.started)
          .count();
    // A committed outcome was recorded as the handler returned it.
    if (run.overran && !committed) {
      outcome.kind = outcome_kind::deadline_exceeded;
      outcome.message = "deadline exceeded: the run took longer than "
                        + format_duration(
                          std::chrono::milliseconds{run.deadline_ms});
    }
    if (run.cancel_requested && !committed) {
      if (outcome.kind == outcome_kind::completed) {
        log_job(spdlog::level::warn,
                job_ref{id, outcome.job_kind, outcome.queue, outcome.attempt},
                "job {}: completed although a cancel was requested (the "
                "handler did not stop); recorded as completed",
                id);
      } else if (outcome.kind != outcome_kind::cancelled
                 || outcome.message.empty()) {
        // Whatever the handler returned: the operator asked to stop. What
        // it said stays in the message.
        outcome.message = outcome.message.empty()
                            ? std::string{cancel_request_message}
                            : std::string{cancel_request_message}
                                + "; the handler returned "
                                + to_string(outcome.kind) + ": "
                                + outcome.message;
        outcome.kind = outcome_kind::cancelled;
        outcome.delay_ms = 0;
      }
    }
  }
  self->send(st.cfg.poller, done_atom::value, id, true, std::move(outcome));
}

/// Starts `job` as the next run.
void start(executor_pointer self, claimed_job job) {
  auto& st = self->state;
  auto number = ++st.run_number;
  st.busy = true;
  st.current = executor_run{};
  auto& run = st.current;
  *st.running_token = run.cancel;
  run.job_id = job.id;
  run.lease = job.lease;
  run.attempt = job.attempt;
  run.observed = !job.started_row.empty();
  run.deadline_ms = job.deadline_ms;
  run.kind = job.kind;
  run.queue = job.queue;
  if (run.observed && st.cfg.hooks) {
    job_event e;
    e.type = event_type::started;
    e.kind = job.kind;
    e.job_json = std::move(job.started_row);
    self->send(st.cfg.hooks, std::move(e));
  }
  if (job.deadline_ms > 0)
    self->delayed_send(self, std::chrono::milliseconds{job.deadline_ms},
                       deadline_atom::value, number);
  run_context ctx;
  ctx.cancel = run.cancel;
  ctx.run = number;
  ctx.timers = st.timers;
  run.started = std::chrono::steady_clock::now();
  auto me = caf::actor_cast<executor_internal>(self);
  auto result = st.cfg.runner->start(
    std::move(job), ctx, [me, number](job_outcome outcome) {
      caf::anon_send(me, outcome_atom::value, number, std::move(outcome));
    });
  // Ran inline to its end: no thread hand-off, no message.
  if (result)
    finish(self, std::move(*result));
}

/// Run `run` passed its deadline: its handler is cancelled and, unless
/// that ends it, given up after abandon_grace.
void on_deadline(executor_pointer self, uint64_t run) {
  auto& st = self->state;
  if (run != st.run_number || !st.busy)
    return;
  auto& cur = st.current;
  cur.overran = true;
  auto limit = format_duration(std::chrono::milliseconds{cur.deadline_ms});
  log_job(spdlog::level::warn, ref_of(cur),
          "job {}: deadline of {} exceeded, cancelling the run",
          cur.job_id, limit);
  cur.cancel.cancel("deadline of " + limit + " exceeded");
  // The cancellation may have ended the run already (asynchronous
  // handlers end on it at once).
  if (st.busy && run == st.run_number)
    self->delayed_send(self, st.cfg.abandon_grace, abandon_atom::value,
                       run);
}

/// The handler of run `run` ignored its deadline's cancellation for
/// abandon_grace: the run is given up as a deadline rescue.
void abandon(executor_pointer self, uint64_t run) {
  auto& st = self->state;
  if (run != st.run_number || !st.busy)
    return;
  auto& cur = st.current;
  auto limit = format_duration(std::chrono::milliseconds{cur.deadline_ms});
  log_job(spdlog::level::err, ref_of(cur),
          "job {}: the handler still runs {} after its deadline of {} "
          "although it was cancelled; giving the run up as a deadline "
          "rescue (its late result will be ignored)",
          cur.job_id, format_duration(st.cfg.abandon_grace), limit);
  st.cfg.runner->abandoned(cur.job_id);
  job_outcome out;
  out.kind = outcome_kind::abandoned;
  out.message = "deadline exceeded: the run passed its deadline ("
                + limit + ") and its handler did not end within "
                + format_duration(st.cfg.abandon_grace) + " after it";
  out.duration_ms
    = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - cur.started)
        .count();
  finish(self, std::move(out));
}

/// A timer of the handler (executor_timer_service) fired: runs its
/// callback if the run that armed it is still the current one.
void fire_timer(executor_pointer self, uint64_t run, uint64_t id) {
  auto& st = self->state;
  std::function<void()> fn;
  {
    auto& t = *st.timer_callbacks;
    std::lock_guard<std::mutex> guard{t.mtx};
    auto i = t.pending.find(id);
    if (i == t.pending.end())
      return;
    fn = std::move(i->second);
    t.pending.erase(i);
  }
  if (run != st.run_number || !st.busy)
    return; // a timer of an earlier run
  try {
    fn();
  } catch (const std::exception& e) {
    log_job(spdlog::level::err, ref_of(st.current),
            "job {}: a timer callback of its handler threw: {}",
            st.current.job_id, printable(e.what()));
  } catch (...) {
    log_job(spdlog::level::err, ref_of(st.current),
            "job {}: a timer callback of its handler threw",
            st.current.job_id);
  }
}

} // namespace

executor_internal::behavior_type executor_behavior(executor_pointer self,
                                                   executor_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.timer_callbacks = std::make_shared<executor_state::timer_table>();
  st.timers = std::make_shared<executor_timer_service>(
    caf::actor_cast<executor_internal>(self), st.timer_callbacks);
  // Whatever ends this actor during a run (shutdown, a bug), the handler is
  // told to stop.
  self->attach_functor([token = st.running_token] {
    if (*token)
      (*token)->cancel("the worker stopped this run");
  });
  return {
    [self](run_atom, claimed_job& job) { start(self, std::move(job)); },
    [self](outcome_atom, uint64_t run, job_outcome& outcome) {
      auto& st = self->state;
      if (run == st.run_number && st.busy)
        finish(self, std::move(outcome));
    },
    [self](cancel_atom, int64_t id, const std::string& reason) {
      auto& st = self->state;
      if (!st.busy || st.current.job_id != id)
        return;
      st.current.lost = true;
      st.current.cancel.cancel(reason);
    },
    [self](cancel_atom, int64_t id) {
      auto& st = self->state;
      if (!st.busy || st.current.job_id != id || st.current.lost)
        return;
      st.current.cancel_requested = true;
      st.current.cancel.cancel(cancel_request_message);
    },
    [self](deadline_atom, uint64_t run) { on_deadline(self, run); },
    [self](abandon_atom, uint64_t run) { abandon(self, run); },
    [self](timer_atom, uint64_t run, uint64_t id) {
      fire_timer(self, run, id);
    },
  };
}

} // namespace aw
