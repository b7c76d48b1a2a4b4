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
  for (auto& [id, exec] : st.running) {
    ids.push_back(id);
    self->send_exit(exec, caf::exit_reason::user_shutdown);
  }
  st.running.clear();
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
  self->state.running.emplace(id, std::move(exec));
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
                int32_t{limit})
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
        for (auto& job : jobs)
          start_executor(self, std::move(job));
        arm_timer(self, st.cfg.poll_interval);
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
  self->attach_functor([self] {
    spdlog::debug("poller[{}]: stopped after {} claim(s), {} job(s)",
                  self->state.cfg.queue, self->state.claims,
                  self->state.claimed);
  });
  schedule_claim(self);
  self->delayed_send(self, self->state.cfg.report_interval, report_atom::value);
  return {
    [self](wake_atom) {
      self->state.maybe_more = true;
      schedule_claim(self);
    },
    [self](done_atom, int64_t id, outcome_kind kind, finish_result result) {
      auto& st = self->state;
      st.running.erase(id);
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
      st.in_backoff = false;
      st.maybe_more = true;
      try_claim(self);
      // Nothing to claim now (all slots busy): look again next interval.
      if (!st.claim_in_flight && !st.in_backoff)
        arm_timer(self, st.cfg.poll_interval);
    },
    [self](claim_atom) {
      self->state.claim_queued = false;
      try_claim(self);
    },
    [self](drain_atom) -> caf::result<int64_t> {
      auto& st = self->state;
      if (st.drain_pending)
        return make_error(ec::invalid_config, "poller[" + st.cfg.queue
                                                + "]: already draining");
      st.draining = true;
      ++st.timer_generation; // idle and backoff timers are void now
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
    [self](drained_atom) {
      self->state.drain_budget_spent = true;
      finish_drain(self);
    },
  };
}

} // namespace aw
