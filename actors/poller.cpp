#include "actors/poller.hpp"

#include <spdlog/spdlog.h>

#include "actors/executor.hpp"
#include "messages/error.hpp"

namespace aw {

namespace {

void arm_timer(poller_pointer self, std::chrono::milliseconds delay) {
  auto gen = ++self->state.timer_generation;
  self->delayed_send(self, delay, tick_atom::value, gen);
}

/// Ends the drain: kills the executors still running, releases their jobs
/// (and any claimed after the drain began) and replies to the drain request.
void finish_drain(poller_pointer self) {
  auto& st = self->state;
  if (!st.drain_pending || st.claim_in_flight)
    return;
  std::vector<int64_t> ids = std::move(st.unstarted);
  st.unstarted.clear();
  for (auto& [id, job] : st.running) {
    // A job that is no longer ours is left for reclaim (charged then).
    if (st.lost.count(id) == 0)
      ids.push_back(id);
    self->send_exit(job.executor, caf::exit_reason::user_shutdown);
  }
  st.running.clear();
  st.lost.clear();
  if (ids.empty()) {
    st.drain_pending = false;
    st.drain_promise.deliver(int64_t{0});
    return;
  }
  spdlog::info("poller[{}]: releasing {} job(s) without charging an attempt",
               st.cfg.queue, ids.size());
  self->request(st.cfg.claimer, caf::infinite, release_atom::value, ids)
    .then(
      [self](int64_t released) {
        self->state.drain_pending = false;
        self->state.drain_promise.deliver(released);
      },
      [self](caf::error& err) {
        spdlog::error("poller[{}]: releasing jobs failed (they will be "
                      "reclaimed after the lease expires): {}",
                      self->state.cfg.queue, render(err));
        self->state.drain_pending = false;
        self->state.drain_promise.deliver(int64_t{0});
      });
}

/// Finishes the drain early when nothing runs any more.
void maybe_finish_drain(poller_pointer self) {
  auto& st = self->state;
  if (st.drain_pending && st.running.empty())
    finish_drain(self);
}

void start_executor(poller_pointer self, claimed_job job) {
  auto& cfg = self->state.cfg;
  auto id = job.id;
  const auto& completer
    = cfg.completers[static_cast<size_t>(id) % cfg.completers.size()];
  auto exec = self->spawn(executor_behavior, std::move(job), cfg.dispatcher,
                          completer, poller_actor{self});
  self->state.running.emplace(id, running_job{std::move(exec),
                                              self->clock().now()});
}

/// Asks the gate for a permit (once) when this poller has none.
void want_permit(poller_pointer self) {
  auto& st = self->state;
  if (!st.cfg.gate || st.has_permit || st.permit_requested || st.draining)
    return;
  st.permit_requested = true;
  self->send(st.cfg.gate, permit_atom::value, poller_actor{self});
}

/// Gives the permit back: this poller found work and need not poll idly.
void give_back_permit(poller_pointer self) {
  auto& st = self->state;
  if (!st.cfg.gate || !st.has_permit)
    return;
  st.has_permit = false;
  self->send(st.cfg.gate, giveback_atom::value, poller_actor{self});
}

/// Arms the idle poll timer, if this poller may poll idly.
void arm_idle_timer(poller_pointer self) {
  auto& st = self->state;
  if (st.has_permit)
    arm_timer(self, st.cfg.poll_interval);
  else
    ++st.timer_generation; // parked: only a wake-up or a permit claims
}

void try_claim(poller_pointer self) {
  auto& st = self->state;
  if (st.draining || st.claim_in_flight || st.in_backoff)
    return;
  auto limit = st.free_slots();
  if (limit <= 0)
    return;
  st.claim_in_flight = true;
  ++st.claims;
  self->request(st.cfg.claimer, caf::infinite, claim_atom::value, st.cfg.queue,
                int32_t{limit},
                static_cast<int64_t>(st.cfg.default_deadline.count()))
    .then(
      [self, limit](std::vector<claimed_job>& jobs) {
        auto& st = self->state;
        st.claim_in_flight = false;
        if (st.claim_backoff.failures() > 0)
          spdlog::info("poller[{}]: claiming again after {} failed "
                       "attempt(s)",
                       st.cfg.queue, st.claim_backoff.failures());
        st.claim_backoff.reset();
        st.claimed += jobs.size();
        if (st.draining) {
          // Claimed while shutting down: never started, handed back.
          for (auto& job : jobs)
            st.unstarted.push_back(job.id);
          if (st.drain_budget_spent || st.running.empty())
            finish_drain(self);
          return;
        }
        // A full batch means more jobs are probably due right now.
        st.maybe_more = static_cast<int>(jobs.size()) >= limit;
        if (jobs.empty()) {
          want_permit(self);
        } else {
          give_back_permit(self);
          for (auto& job : jobs)
            start_executor(self, std::move(job));
        }
        arm_idle_timer(self);
        if (st.maybe_more && st.free_slots() > 0)
          try_claim(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.claim_in_flight = false;
        if (st.draining) {
          if (st.drain_budget_spent || st.running.empty())
            finish_drain(self);
          return;
        }
        auto delay = st.claim_backoff.next();
        spdlog::error("poller[{}]: claim failed, retrying in {} ms: {}",
                      st.cfg.queue, delay.count(), render(err));
        st.in_backoff = true;
        arm_timer(self, delay);
      });
}

/// Claims once the messages already in the mailbox (more finished jobs,
/// more wake-ups) have been handled, so a burst becomes one claim.
void schedule_claim(poller_pointer self) {
  auto& st = self->state;
  if (st.claim_queued || st.draining)
    return;
  st.claim_queued = true;
  self->send(self, claim_atom::value);
}

} // namespace

poller_actor::behavior_type poller_behavior(poller_pointer self,
                                            poller_config cfg) {
  if (cfg.completers.empty())
    cfg.completers.push_back(cfg.claimer);
  self->state.cfg = std::move(cfg);
  // Behind a gate a poller starts parked and asks for a permit; only permit
  // holders poll on the idle interval.
  self->state.has_permit = !self->state.cfg.gate;
  self->attach_functor([self] {
    spdlog::debug("poller[{}]: stopped after {} claim(s), {} job(s)",
                  self->state.cfg.queue, self->state.claims,
                  self->state.claimed);
  });
  if (self->state.has_permit)
    schedule_claim(self);
  else
    want_permit(self);
  self->delayed_send(self, self->state.cfg.report_interval, report_atom::value);
  return {
    [self](wake_atom) {
      self->state.maybe_more = true;
      schedule_claim(self);
    },
    [self](done_atom, int64_t id, outcome_kind kind, finish_result result) {
      auto& st = self->state;
      st.running.erase(id);
      st.lost.erase(id);
      if (result == finish_result::stale)
        ++st.stale;
      else if (kind == outcome_kind::completed)
        ++st.completed;
      else
        ++st.failed;
      if (st.draining)
        maybe_finish_drain(self);
      else if (st.maybe_more)
        schedule_claim(self);
    },
    [self](tick_atom, uint64_t gen) {
      auto& st = self->state;
      if (gen != st.timer_generation || st.draining)
        return;
      bool backoff_retry = st.in_backoff;
      st.in_backoff = false;
      if (!st.has_permit && !backoff_retry)
        return; // parked behind the idle poll gate
      st.maybe_more = true;
      try_claim(self);
      // Nothing to claim now (all slots busy): look again next interval.
      if (!st.claim_in_flight && !st.in_backoff)
        arm_idle_timer(self);
    },
    [self](claim_atom) {
      self->state.claim_queued = false;
      try_claim(self);
    },
    [self](drain_atom) -> caf::result<int64_t> {
      auto& st = self->state;
      if (st.drain_pending)
        return make_error(ec::internal, "poller[" + st.cfg.queue
                                                + "]: already draining");
      st.draining = true;
      ++st.timer_generation; // idle and backoff timers are void now
      give_back_permit(self);
      st.drain_promise = self->make_response_promise<int64_t>();
      st.drain_pending = true;
      auto promise = st.drain_promise;
      if (!st.running.empty() || st.claim_in_flight) {
        spdlog::info("poller[{}]: draining {} running job(s) for up to {} ms",
                     st.cfg.queue, st.running.size(),
                     st.cfg.shutdown_drain.count());
        self->delayed_send(self, st.cfg.shutdown_drain, drained_atom::value);
      }
      maybe_finish_drain(self);
      return promise;
    },
    [self](report_atom) {
      auto& st = self->state;
      if (st.completed + st.failed + st.stale > 0)
        spdlog::info("queue {}: {} completed, {} failed, {} no longer ours in "
                     "the last {} s; {} running",
                     st.cfg.queue, st.completed, st.failed, st.stale,
                     st.cfg.report_interval.count() / 1000, st.running.size());
      st.completed = st.failed = st.stale = 0;
      if (!st.draining)
        self->delayed_send(self, st.cfg.report_interval, report_atom::value);
    },
    [self](running_atom)
      -> std::tuple<std::vector<int64_t>, std::vector<int64_t>> {
      auto& st = self->state;
      std::vector<int64_t> ids;
      std::vector<int64_t> claimed_at;
      for (auto& [id, job] : st.running) {
        if (st.lost.count(id) != 0)
          continue;
        ids.push_back(id);
        claimed_at.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               job.claimed_at.time_since_epoch())
                               .count());
      }
      return {std::move(ids), std::move(claimed_at)};
    },
    [self](lost_atom, const std::vector<int64_t>& ids,
           const std::string& reason) {
      auto& st = self->state;
      for (auto id : ids) {
        auto i = st.running.find(id);
        if (i == st.running.end() || !st.lost.insert(id).second)
          continue;
        spdlog::warn("poller[{}]: job {} is no longer ours, cancelling it: {}",
                     st.cfg.queue, id, reason);
        self->send(i->second.executor, cancel_atom::value, reason);
      }
    },
    [self](permit_atom) {
      auto& st = self->state;
      st.permit_requested = false;
      if (st.draining) {
        st.has_permit = true;
        give_back_permit(self);
        return;
      }
      st.has_permit = true;
      // Our turn to poll idly: look now, then every interval.
      st.maybe_more = true;
      try_claim(self);
      if (!st.claim_in_flight && !st.in_backoff)
        arm_idle_timer(self);
    },
    [self](drained_atom) {
      self->state.drain_budget_spent = true;
      finish_drain(self);
    },
  };
}

} // namespace aw
