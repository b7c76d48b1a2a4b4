// The poller's jobs: starting buffered jobs on free executors, recording
// their outcomes, cancelling on request, handing back what the watchdog gave
// up, and the drain (actors/internal/poller_steps.hpp).

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actor_worker/actors/executor.hpp"
#include "actor_worker/actors/internal/poller_steps.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw::poller_steps {

void arm_timer(poller_pointer self, std::chrono::milliseconds delay) {
  auto gen = ++self->state.timer_generation;
  self->delayed_send(self, delay, tick_atom::value, gen);
}

namespace {

int64_t ns_since_epoch(caf::actor_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           t.time_since_epoch())
    .count();
}

} // namespace

held_job held(int64_t id, int64_t lease, caf::actor_clock::time_point at) {
  return held_job{id, lease, ns_since_epoch(at)};
}

size_t completer_of(int64_t id, size_t n) {
  return static_cast<size_t>(id >> 6) % n;
}

void flush_outbox(poller_pointer self) {
  auto& st = self->state;
  st.outbox_flush_queued = false;
  for (size_t i = 0; i < st.outbox.size(); ++i)
    if (!st.outbox[i].empty()) {
      self->send(st.cfg.completers[i], finish_atom::value,
                 std::move(st.outbox[i]), poller_actor{self});
      st.outbox[i] = {};
    }
}

// -- the drain ------------------------------------------------------------------

void release_jobs(poller_pointer self, std::vector<held_job> jobs,
                  bool started) {
  auto& st = self->state;
  if (jobs.empty())
    return;
  spdlog::info("poller[{}]: releasing {} {} job(s) without charging an "
               "attempt",
               st.cfg.queue, jobs.size(), started ? "running" : "unstarted");
  ++st.releases_in_flight;
  self->request(st.cfg.claimer, caf::infinite, release_atom::value,
                std::move(jobs), started)
    .then(
      [self](int64_t n) {
        self->state.released += n;
        --self->state.releases_in_flight;
        maybe_finish_drain(self);
      },
      [self](caf::error& err) {
        spdlog::error("poller[{}]: releasing jobs failed (they will be "
                      "reclaimed after the lease expires): {}",
                      self->state.cfg.queue, render(err));
        --self->state.releases_in_flight;
        maybe_finish_drain(self);
      });
}

void hand_back(poller_pointer self) {
  auto& st = self->state;
  if (st.hand_back_in_flight
      || (st.hand_back_started.empty() && st.hand_back_unstarted.empty()))
    return;
  bool started = !st.hand_back_started.empty();
  auto jobs = std::move(started ? st.hand_back_started : st.hand_back_unstarted);
  (started ? st.hand_back_started : st.hand_back_unstarted).clear();
  st.hand_back_in_flight = true;
  self->request(st.cfg.claimer, caf::infinite, release_atom::value, jobs, started)
    .then(
      [self, n = jobs.size(), started](int64_t released) {
        auto& st = self->state;
        st.hand_back_in_flight = false;
        spdlog::info("poller[{}]: gave back {} of {} {} job(s) the watchdog "
                     "gave up (the others were taken back meanwhile)",
                     st.cfg.queue, released, n,
                     started ? "started" : "unstarted");
        hand_back(self);
      },
      [self, jobs, started](caf::error& err) mutable {
        auto& st = self->state;
        st.hand_back_in_flight = false;
        auto& pending = started ? st.hand_back_started : st.hand_back_unstarted;
        pending.insert(pending.end(), jobs.begin(), jobs.end());
        spdlog::warn("poller[{}]: giving back {} job(s) the watchdog gave up "
                     "failed, trying again in {} ms: {}",
                     st.cfg.queue, jobs.size(), st.cfg.abandon_grace.count(),
                     render(err));
        self->delayed_send(self, st.cfg.abandon_grace, hand_back_atom::value);
      });
}

void release_buffer(poller_pointer self) {
  auto& st = self->state;
  std::vector<held_job> jobs;
  for (auto& b : st.buffer)
    jobs.push_back(held(b.job.id, b.job.lease, b.claimed_at));
  st.buffer.clear();
  st.buffer_bytes = 0;
  release_jobs(self, std::move(jobs), false);
}

void expire_drain(poller_pointer self) {
  auto& st = self->state;
  st.phase = poller_phase::drain_expired;
  std::vector<held_job> jobs;
  for (auto& [id, job] : st.running) {
    // A job that is no longer ours is left for reclaim (charged then).
    if (st.lost.count(id) == 0)
      jobs.push_back(held(id, job.lease, job.claimed_at));
    // Stopping the executor cancels the handler's token.
    self->send_exit(job.executor, caf::exit_reason::user_shutdown);
  }
  st.running.clear();
  st.running_bytes = 0;
  release_jobs(self, std::move(jobs), true);
  maybe_finish_drain(self);
}

void expire_if_overdue(poller_pointer self) {
  auto& st = self->state;
  if (st.phase == poller_phase::drain_overdue && st.claims_in_flight == 0)
    expire_drain(self);
}

void maybe_finish_drain(poller_pointer self) {
  auto& st = self->state;
  bool awaited = st.phase == poller_phase::draining
                 || st.phase == poller_phase::drain_overdue
                 || st.phase == poller_phase::drain_expired;
  if (!awaited || !st.running.empty() || st.claims_in_flight > 0
      || st.releases_in_flight > 0)
    return;
  // Outcomes reach storage before the drain's reply: the final flush the
  // supervisor asks storage for after it comes later.
  flush_outbox(self);
  st.phase = poller_phase::stopped;
  st.drain_promise.deliver(st.released);
}

// -- running jobs ---------------------------------------------------------------

void start_jobs(poller_pointer self) {
  auto& st = self->state;
  if (st.phase != poller_phase::running)
    return;
  auto now = self->clock().now();
  while (st.free_slots() > 0 && !st.buffer.empty()) {
    auto b = std::move(st.buffer.front());
    st.buffer.pop_front();
    auto bytes = b.job.bytes();
    st.buffer_bytes -= bytes;
    // Jobs that waited long in the buffer: it holds more than the node
    // runs soon; keep less, so idle nodes can take the rest.
    auto waited = now - b.claimed_at;
    if (waited > defaults::prefetch_horizon)
      st.prefetch = std::max(1, st.prefetch / 2);
    st.recent_wait = std::max(st.recent_wait, waited);
    auto id = b.job.id;
    auto lease = b.job.lease;
    executor_actor exec;
    if (st.idle_executors.empty()) {
      executor_config ec;
      ec.runner = st.cfg.runner;
      ec.poller = poller_actor{self};
      ec.hooks = st.cfg.hooks;
      ec.abandon_grace = st.cfg.abandon_grace;
      exec = self->spawn(executor_behavior, std::move(ec));
      self->monitor(exec);
      st.executors->push_back(exec);
    } else {
      exec = std::move(st.idle_executors.back());
      st.idle_executors.pop_back();
    }
    if (auto& w = st.cfg.watcher) {
      // Due -> claim (read by storage) plus claim -> start (buffered here).
      auto wait = b.job.claim_wait_seconds;
      if (wait >= 0)
        wait += std::chrono::duration<double>(waited).count();
      w->started(st.cfg.queue, b.job.kind, wait);
    }
    self->send(exec, run_atom::value, std::move(b.job));
    st.running.emplace(id, started_job{std::move(exec), lease, b.claimed_at,
                                       bytes});
    st.running_bytes += bytes;
    st.unrecorded_starts.push_back({id, lease, 0});
  }
  // Starts are recorded a moment later, a few statements a second: most
  // fast jobs have finished by then and need no record (their outcome
  // says enough).
  if (!st.unrecorded_starts.empty() && !st.start_record_armed) {
    st.start_record_armed = true;
    self->delayed_send(self, defaults::start_record_delay,
                       started_atom::value);
  }
  if (st.cfg.watcher
      && st.reported_running != static_cast<int>(st.running.size())) {
    st.reported_running = static_cast<int>(st.running.size());
    st.cfg.watcher->slots(st.cfg.queue, st.reported_running,
                          st.cfg.concurrency);
  }
  if (st.free_slots() > 0 && st.buffer.empty() && st.maybe_more) {
    if (!st.starved_since)
      st.starved_since = now;
  } else if (st.starved_since) {
    st.starved_time += now - *st.starved_since;
    st.starved_since.reset();
  }
}

void record_outcome(poller_pointer self, job_outcome outcome,
                    started_job job) {
  auto& st = self->state;
  auto id = outcome.job_id;
  auto& box = st.outbox[completer_of(id, st.outbox.size())];
  box.push_back(std::move(outcome));
  if (!st.outbox_flush_queued) {
    st.outbox_flush_queued = true;
    self->send(self, flush_atom::value);
  }
  st.committing.emplace(id, std::move(job));
}

void cancel_on_request(poller_pointer self, const std::vector<int64_t>& ids) {
  auto& st = self->state;
  std::unordered_set<int64_t> wanted(ids.begin(), ids.end());
  std::vector<buffered_job> unstarted;
  for (auto& b : st.buffer)
    if (wanted.count(b.job.id) > 0)
      unstarted.push_back(b);
  if (!unstarted.empty())
    st.buffer.remove_if([&](const buffered_job& b) {
      if (wanted.count(b.job.id) == 0)
        return false;
      st.buffer_bytes -= b.job.bytes();
      return true;
    });
  for (auto& b : unstarted) {
    // (Logged by storage once the cancel is recorded, as every outcome.)
    job_outcome out;
    out.job_id = b.job.id;
    out.job_kind = b.job.kind;
    out.queue = b.job.queue;
    out.lease = b.job.lease;
    out.attempt = b.job.attempt;
    out.observed = !b.job.started_row.empty();
    out.kind = outcome_kind::cancelled;
    out.message = cancel_request_message;
    record_outcome(self, std::move(out),
                   started_job{executor_actor{}, b.job.lease, b.claimed_at,
                               0});
  }
  for (auto id : ids) {
    auto i = st.running.find(id);
    if (i == st.running.end() || st.lost.count(id) > 0)
      continue;
    spdlog::info("poller[{}]: job {}: cancel requested, cancelling its "
                 "handler",
                 st.cfg.queue, id);
    self->send(i->second.executor, cancel_atom::value, id);
  }
}

} // namespace aw::poller_steps
