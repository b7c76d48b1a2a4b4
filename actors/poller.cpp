#include "actor_worker/actors/poller.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actor_worker/actors/internal/poller_steps.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw {

using namespace poller_steps;

namespace {

// -- the poller's messages --------------------------------------------------------

/// An executor stopped (a bug killed it): its job is left to its lease
/// (no longer heartbeated, it is rescued and charged), its slot is free.
void on_executor_down(poller_pointer self, caf::down_msg& dm) {
  auto& st = self->state;
  auto gone = [&](const executor_actor& e) { return e.address() == dm.source; };
  st.executors->erase(std::remove_if(st.executors->begin(),
                                     st.executors->end(), gone),
                      st.executors->end());
  st.idle_executors.erase(std::remove_if(st.idle_executors.begin(),
                                         st.idle_executors.end(), gone),
                          st.idle_executors.end());
  for (auto i = st.running.begin(); i != st.running.end(); ++i) {
    if (i->second.executor.address() != dm.source)
      continue;
    if (st.phase == poller_phase::running)
      spdlog::error("poller[{}]: the executor of job {} stopped ({}); the "
                    "job is left to the rescue of its lease",
                    st.cfg.queue, i->first, caf::to_string(dm.reason));
    st.running_bytes -= i->second.bytes;
    st.lost.erase(i->first);
    st.running.erase(i);
    break;
  }
  if (st.phase == poller_phase::running)
    start_jobs(self);
  else
    maybe_finish_drain(self);
}

/// Work may be waiting (NOTIFY, a local enqueue): claim once the mailbox
/// is handled.
void on_wake(poller_pointer self) {
  ++self->state.wakes;
  self->state.maybe_more = true;
  schedule_claim(self);
}

/// A handler returned: its outcome goes to storage (unless the job is no
/// longer ours) and its slot takes the next buffered job.
void on_done(poller_pointer self, int64_t id, bool record,
             job_outcome& outcome) {
  auto& st = self->state;
  auto i = st.running.find(id);
  if (i == st.running.end())
    return; // released by an expired drain
  st.running_bytes -= i->second.bytes;
  st.idle_executors.push_back(i->second.executor);
  if (record) {
    ++st.handlers_run;
    // Outcomes go to storage in batches: one message per flush of the
    // mailbox, not one per job.
    record_outcome(self, std::move(outcome), std::move(i->second));
  } else {
    st.lost.erase(id);
    ++st.stale;
  }
  st.running.erase(i);
  if (st.phase != poller_phase::running) {
    maybe_finish_drain(self);
    return;
  }
  start_jobs(self);
  if (st.maybe_more)
    schedule_claim(self);
}

/// The start-record timer: tells storage which of the jobs started since
/// the last round still run.
void record_starts(poller_pointer self) {
  auto& st = self->state;
  st.start_record_armed = false;
  std::vector<held_job> still_running;
  for (auto& j : st.unrecorded_starts) {
    auto i = st.running.find(j.id);
    if (i != st.running.end() && i->second.lease == j.lease)
      still_running.push_back(j);
  }
  st.unrecorded_starts.clear();
  if (!still_running.empty() && !st.cfg.completers.empty())
    self->send(st.cfg.completers.front(), started_atom::value,
               std::move(still_running));
}

/// Storage committed outcomes: counts them for the report; a slot of a
/// cluster-wide limit may be free.
void on_committed(poller_pointer self,
                  std::vector<outcome_report>& reports) {
  auto& st = self->state;
  for (auto& r : reports) {
    st.committing.erase(r.job_id);
    st.lost.erase(r.job_id);
    if (r.result == finish_result::stale)
      ++st.stale;
    else if (r.kind == outcome_kind::completed)
      ++st.completed;
    else if (r.kind == outcome_kind::snoozed)
      ++st.snoozed;
    else if (r.kind == outcome_kind::cancelled)
      ++st.cancelled;
    else if (r.kind == outcome_kind::waiting_callback)
      ++st.parked;
    else
      ++st.failed;
  }
  if (st.phase != poller_phase::running)
    return;
  if (st.maybe_more) {
    schedule_claim(self);
  } else if (st.limited && !reports.empty()) {
    // Our jobs finished: a slot of the global limit may be free.
    st.limited = false;
    schedule_claim(self);
  }
}

/// The poller's timer (idle interval, claim backoff, a limit's window, the
/// pause's probe), unless a newer arm made it stale.
void on_tick(poller_pointer self, uint64_t gen) {
  auto& st = self->state;
  if (gen != st.timer_generation || st.phase != poller_phase::running)
    return;
  if (st.paused) {
    // Does the pause still hold? (A resume NOTIFY may have been lost.)
    probe_pause(self);
    arm_timer(self, st.cfg.poll_interval);
    return;
  }
  bool backoff_retry = st.claim == claim_phase::backing_off;
  bool limit_retry = st.limited;
  if (backoff_retry)
    st.claim = claim_phase::ready;
  if (st.permit != permit_phase::held && !backoff_retry && !limit_retry)
    return; // parked behind the idle poll gate
  if (st.cfg.gate && !backoff_retry && !limit_retry) {
    // This permit's interval is up: the gate passes it to a parked
    // poller if one waits, or hands it back to poll now (permit_atom).
    st.permit = permit_phase::requested;
    self->send(st.cfg.gate, rotate_atom::value, poller_actor{self});
    return;
  }
  st.limited = false;
  st.maybe_more = true;
  try_claim(self);
  if (st.claims_in_flight == 0) {
    // Nothing to claim now (the buffer is full): ask whether the queue
    // was paused meanwhile, and look again next interval.
    if (!st.buffer.empty())
      probe_pause(self);
    arm_idle_timer(self);
  }
}

/// The claim schedule_claim queued comes up.
void on_claim(poller_pointer self) {
  auto& st = self->state;
  if (st.claim == claim_phase::queued)
    st.claim = claim_phase::ready;
  try_claim(self);
}

/// Shutdown: no more claims, the buffer goes back unstarted, running jobs
/// get the drain budget. Replies with the jobs released once nothing runs.
caf::result<int64_t> drain(poller_pointer self) {
  auto& st = self->state;
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  if (st.claims > 0)
    spdlog::info("poller[{}]: {} handler(s) ran; {} claim(s) took {} "
                 "job(s), {:.2f} ms per claim; handlers waited {} ms for "
                 "claims",
                 st.cfg.queue, st.handlers_run, st.claims, st.claimed,
                 duration_cast<std::chrono::microseconds>(st.claim_time)
                     .count()
                   / 1000.0 / static_cast<double>(st.claims),
                 duration_cast<milliseconds>(st.starved_time).count());
  if (st.phase != poller_phase::running)
    return make_error(ec::internal, "poller[" + st.cfg.queue
                                            + "]: already draining");
  st.phase = poller_phase::draining;
  st.claim = claim_phase::ready;
  ++st.timer_generation; // idle and backoff timers are void now
  give_back_permit(self);
  st.drain_promise = self->make_response_promise<int64_t>();
  auto promise = st.drain_promise;
  release_buffer(self);
  if (!st.running.empty()) {
    spdlog::info("poller[{}]: draining {} running job(s) for up to {} ms",
                 st.cfg.queue, st.running.size(),
                 st.cfg.shutdown_drain.count());
    self->delayed_send(self, st.cfg.shutdown_drain, drained_atom::value);
  }
  maybe_finish_drain(self);
  return promise;
}

/// Logs the outcomes and claims since the last report (when there were
/// any) and re-arms the report while running.
void report_activity(poller_pointer self) {
  auto& st = self->state;
  if (st.reported() > 0) {
    // Claim round trips of the interval: p50 and p99 (ms).
    auto pct = [&](double q) {
      if (st.claim_rtts.empty())
        return 0.0;
      auto i = static_cast<size_t>(q * static_cast<double>(st.claim_rtts.size() - 1));
      std::nth_element(st.claim_rtts.begin(), st.claim_rtts.begin() + static_cast<long>(i),
                       st.claim_rtts.end());
      return static_cast<double>(st.claim_rtts[i]) / 1000.0;
    };
    auto p50 = pct(0.5);
    auto p99 = pct(0.99);
    spdlog::info("queue {}: {} completed, {} failed, {} snoozed, {} "
                 "cancelled, {} waiting for a callback, {} no longer ours "
                 "in the last {} s; {} running, {} buffered; {} claim(s), "
                 "round trip p50 {:.1f} ms, p99 {:.1f} ms",
                 st.cfg.queue, st.completed, st.failed, st.snoozed,
                 st.cancelled, st.parked, st.stale,
                 whole_seconds(st.cfg.report_interval), st.running.size(),
                 st.buffer.size(), st.claim_rtts.size(), p50, p99);
  }
  st.completed = st.failed = st.snoozed = st.cancelled = st.parked
    = st.stale = 0;
  st.claim_rtts.clear();
  if (st.phase == poller_phase::running)
    self->delayed_send(self, st.cfg.report_interval, report_atom::value);
}

/// Every job this poller holds a lease on (buffered, running and not lost,
/// committing), for the lease keeper's heartbeat.
std::vector<held_job> held_jobs(poller_pointer self) {
  auto& st = self->state;
  std::vector<held_job> out;
  out.reserve(st.buffer.size() + st.running.size() + st.committing.size());
  for (auto& b : st.buffer)
    out.push_back(held(b.job.id, b.job.lease, b.claimed_at));
  for (auto& [id, job] : st.running)
    if (st.lost.count(id) == 0)
      out.push_back(held(id, job.lease, job.claimed_at));
  for (auto& [id, job] : st.committing)
    out.push_back(held(id, job.lease, job.claimed_at));
  return out;
}

/// Jobs that are no longer ours (lease lost or abandoned): buffered ones
/// are dropped, running ones cancelled; with `give_back`, both are released
/// once the database answers.
void on_lost(poller_pointer self, const std::vector<int64_t>& ids,
             const std::string& reason, bool give_back) {
  auto& st = self->state;
  std::unordered_set<int64_t> gone(ids.begin(), ids.end());
  // Buffered jobs that are no longer ours are dropped (and given back
  // unstarted when the database may still count them as ours).
  auto dropped = st.buffer.remove_if([&](const buffered_job& b) {
    if (gone.count(b.job.id) == 0)
      return false;
    st.buffer_bytes -= b.job.bytes();
    if (give_back)
      st.hand_back_unstarted.push_back(held(b.job.id, b.job.lease, b.claimed_at));
    return true;
  });
  if (dropped > 0)
    spdlog::warn("poller[{}]: dropping {} buffered job(s) that are no "
                 "longer ours: {}",
                 st.cfg.queue, dropped, reason);
  for (auto id : ids) {
    auto i = st.running.find(id);
    if (i == st.running.end() || !st.lost.insert(id).second)
      continue;
    spdlog::warn("poller[{}]: job {} is no longer ours, cancelling it: {}",
                 st.cfg.queue, id, reason);
    self->send(i->second.executor, cancel_atom::value, id, reason);
    if (give_back)
      st.hand_back_started.push_back(
        held(id, i->second.lease, i->second.claimed_at));
  }
  hand_back(self);
}

/// The gate granted the idle poll permit.
void on_permit(poller_pointer self) {
  auto& st = self->state;
  st.permit = permit_phase::held;
  // Draining, or claiming on a timer of its own (claim backoff, a
  // cluster-wide limit, the pause's probe): another poller needs it
  // more, and a successful claim asks for it again.
  if (st.phase != poller_phase::running
      || st.claim == claim_phase::backing_off || st.limited || st.paused) {
    give_back_permit(self);
    return;
  }
  // Our turn to poll idly: look now, then every interval.
  st.maybe_more = true;
  try_claim(self);
  if (st.claims_in_flight == 0) {
    if (!st.buffer.empty())
      probe_pause(self); // the buffer is full: was the queue paused?
    arm_idle_timer(self);
  }
}

/// A NOTIFY told the queue was paused or resumed.
void on_pause(poller_pointer self, bool paused) {
  if (paused)
    enter_pause(self, "told by NOTIFY");
  else
    leave_pause(self, "told by NOTIFY");
}

/// The drain budget ran out.
void on_drain_timeout(poller_pointer self) {
  auto& st = self->state;
  if (st.phase != poller_phase::draining)
    return;
  if (st.claims_in_flight > 0)
    st.phase = poller_phase::drain_overdue; // expire_drain when back
  else
    expire_drain(self);
}

} // namespace

// -- the behaviour -----------------------------------------------------------------

poller_internal::behavior_type poller_behavior(poller_pointer self,
                                               poller_config cfg) {
  if (cfg.completers.empty())
    cfg.completers.push_back(cfg.claimer);
  cfg.local_queue_size = std::max(1, cfg.local_queue_size);
  self->state.cfg = std::move(cfg);
  auto& st = self->state;
  st.outbox.resize(st.cfg.completers.size());
  st.claims_at.assign(st.cfg.completers.size(), 0);
  // Start with one round of work buffered; the buffer grows while handlers
  // outrun the claims.
  st.prefetch = std::clamp(st.cfg.concurrency, 1, st.cfg.local_queue_size);
  // Behind a gate a poller starts parked and asks for a permit; only permit
  // holders poll on the idle interval.
  st.permit = st.cfg.gate ? permit_phase::none : permit_phase::held;
  // The executors live as long as their poller. (The functor runs after
  // the state is gone: it owns what it uses.)
  self->attach_functor([executors = st.executors, queue = st.cfg.queue] {
    spdlog::debug("poller[{}]: stopped", queue);
    for (auto& e : *executors)
      caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler(
    [self](caf::down_msg& dm) { on_executor_down(self, dm); });
  if (st.permit == permit_phase::held)
    schedule_claim(self);
  else
    want_permit(self);
  self->delayed_send(self, st.cfg.report_interval, report_atom::value);
  return {
    [self](wake_atom) { on_wake(self); },
    [self](done_atom, int64_t id, bool record, job_outcome& outcome) {
      on_done(self, id, record, outcome);
    },
    [self](flush_atom) { flush_outbox(self); },
    [self](started_atom) { record_starts(self); },
    [self](committed_atom, std::vector<outcome_report>& reports) {
      on_committed(self, reports);
    },
    [self](tick_atom, uint64_t gen) { on_tick(self, gen); },
    [self](claim_atom) { on_claim(self); },
    [self](drain_atom) -> caf::result<int64_t> { return drain(self); },
    [self](report_atom) { report_activity(self); },
    [self](running_atom) -> std::vector<held_job> { return held_jobs(self); },
    [self](lost_atom, const std::vector<int64_t>& ids,
           const std::string& reason, bool give_back) {
      on_lost(self, ids, reason, give_back);
    },
    [self](hand_back_atom) { hand_back(self); },
    [self](cancel_atom, const std::vector<int64_t>& ids) {
      cancel_on_request(self, ids);
    },
    [self](permit_atom) { on_permit(self); },
    [self](pause_atom, bool paused) { on_pause(self, paused); },
    [self](drained_atom) { on_drain_timeout(self); },
  };
}

} // namespace aw
