// The poller's claims: how much the next claim may take, what a claim's
// result does to the buffer, backoff and limits; the idle poll gate; pause
// and resume (actors/internal/poller_steps.hpp).

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actor_worker/actors/internal/poller_steps.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw::poller_steps {

// -- the idle poll gate -----------------------------------------------------------

void want_permit(poller_pointer self) {
  auto& st = self->state;
  if (!st.cfg.gate || st.permit != permit_phase::none
      || st.phase != poller_phase::running)
    return;
  st.permit = permit_phase::requested;
  self->send(st.cfg.gate, permit_atom::value, poller_actor{self});
}

void give_back_permit(poller_pointer self) {
  auto& st = self->state;
  if (!st.cfg.gate || st.permit != permit_phase::held)
    return;
  st.permit = permit_phase::none;
  self->send(st.cfg.gate, giveback_atom::value, poller_actor{self});
}

void arm_idle_timer(poller_pointer self) {
  auto& st = self->state;
  if (st.permit == permit_phase::held)
    arm_timer(self, st.cfg.poll_interval);
  else
    ++st.timer_generation; // parked: only a wake-up or a permit claims
}

// -- pause and resume ----------------------------------------------------------

void enter_pause(poller_pointer self, const char* how) {
  auto& st = self->state;
  if (st.paused || st.phase != poller_phase::running)
    return;
  st.paused = true;
  st.limited = false;
  st.maybe_more = false;
  spdlog::info("poller[{}]: queue paused ({}): no new jobs start; {} "
               "buffered job(s) go back, {} running finish",
               st.cfg.queue, how, st.buffer.size(), st.running.size());
  release_buffer(self);
  give_back_permit(self);
  arm_timer(self, st.cfg.poll_interval);
}

void leave_pause(poller_pointer self, const char* how) {
  auto& st = self->state;
  if (!st.paused || st.phase != poller_phase::running)
    return;
  st.paused = false;
  spdlog::info("poller[{}]: queue resumed ({})", st.cfg.queue, how);
  st.maybe_more = true;
  ++st.timer_generation; // the pause's probe timer is void now
  if (st.claim == claim_phase::backing_off)
    st.claim = claim_phase::ready; // its timer was voided with the probe's
  schedule_claim(self);
  arm_idle_timer(self);
}

void probe_pause(poller_pointer self) {
  auto& st = self->state;
  self->request(st.cfg.claimer, caf::infinite, claim_atom::value, st.cfg.queue,
                int32_t{0}, int64_t{1}, int64_t{0}, false)
    .then(
      [self](claim_result& result) {
        if (result.paused)
          enter_pause(self, "found on a poll");
        else
          leave_pause(self, "found on a poll");
      },
      [self](caf::error& err) {
        spdlog::error("poller[{}]: asking whether the queue is paused "
                      "failed: {}",
                      self->state.cfg.queue, render(err));
      });
}

// -- claims -----------------------------------------------------------------------

namespace {

/// How many jobs the next claim may take now (0: none). The running slots,
/// the buffer and the claims in flight together aim at the concurrency plus
/// the buffer's target; a claim goes out when there is room for a share of
/// the target (target / (claims_in_flight + 1)), or for anything when the
/// handlers wait. So under load claims of a third of the target overlap,
/// and one arrives before the buffer runs dry.
int claim_room(const poller_state& st) {
  int buffered = static_cast<int>(st.buffer.size());
  int slots = std::max(0, st.free_slots());
  // Storage is far behind with the outcomes: claim nothing more until it
  // catches up.
  if (st.committing.size()
      > static_cast<size_t>(4 * std::max(st.cfg.local_queue_size,
                                         st.cfg.concurrency)))
    return 0;
  int room = st.prefetch + slots - buffered - st.claiming_rows;
  if (room <= 0)
    return 0;
  // Handlers wait for work right now: claim whatever fits.
  bool starving = buffered == 0 && st.claims_in_flight == 0;
  int share = std::max(1, st.prefetch / (defaults::claims_in_flight + 1));
  if (room < share && !starving)
    return 0;
  return std::min(defaults::max_claim, room);
}

/// Jobs this poller already holds that came back in a claim: the claim
/// they were held under was lost (a database crash rolled it back), so the held copy's outcome can no longer be recorded.
/// A buffered old copy is dropped for the new one; a running or committing
/// one cannot run beside it (runs are keyed by job id): the old run is
/// cancelled as lost and the new copy handed back, due again at once and
/// uncharged, for the next claim.
void drop_reclaimed(poller_pointer self, claim_result& result,
                    caf::actor_clock::time_point now) {
  auto& st = self->state;
  if (st.running.empty() && st.committing.empty() && st.buffer.empty())
    return;
  std::unordered_set<int64_t> claimed;
  for (auto& job : result.jobs)
    claimed.insert(job.id);
  st.buffer.remove_if([&](const buffered_job& b) {
    if (claimed.count(b.job.id) == 0)
      return false;
    st.buffer_bytes -= b.job.bytes();
    return true;
  });
  std::vector<held_job> handed_back;
  std::vector<int64_t> stale_runs;
  auto twice = [&](const claimed_job& job) {
    bool runs = st.running.count(job.id) > 0;
    if (!runs && st.committing.count(job.id) == 0)
      return false;
    if (runs)
      stale_runs.push_back(job.id);
    handed_back.push_back(held(job.id, job.lease, now));
    return true;
  };
  result.jobs.erase(
    std::remove_if(result.jobs.begin(), result.jobs.end(), twice),
    result.jobs.end());
  if (handed_back.empty())
    return;
  spdlog::warn("poller[{}]: {} job(s) claimed again while still held here: "
               "their earlier claim was lost (did the database restart?)",
               st.cfg.queue, handed_back.size());
  if (!stale_runs.empty())
    self->send(self, lost_atom::value, std::move(stale_runs),
               std::string{"its claim was lost (the database rolled it "
                           "back) and the job was claimed again"},
               false);
  release_jobs(self, std::move(handed_back), false);
}

/// Logs that claims find a claim lock of the queue stuck (once, then at
/// most every defaults::claim_lock_log_interval), and when they no longer
/// do.
void note_claim_blocked(poller_pointer self,
                        const std::vector<std::string>& blocked_by,
                        caf::actor_clock::time_point now) {
  auto& st = self->state;
  if (blocked_by.empty()) {
    if (st.claim_blocked)
      spdlog::info("poller[{}]: claims get their claim locks again",
                   st.cfg.queue);
    st.claim_blocked = false;
    return;
  }
  if (!st.claim_blocked
      || now - st.claim_blocked_logged_at
           >= defaults::claim_lock_log_interval) {
    std::string holders;
    for (auto& b : blocked_by)
      holders += (holders.empty() ? "" : "; ") + b;
    spdlog::warn("poller[{}]: a claim waited {} ms for a claim lock of the "
                 "queue and went on without the jobs behind it ({}); every "
                 "claim tries the lock again until the session lets go",
                 st.cfg.queue, defaults::claim_lock_wait.count(), holders);
    st.claim_blocked_logged_at = now;
  }
  st.claim_blocked = true;
}

void on_claimed(poller_pointer self, int limit, int64_t budget,
                uint64_t wakes_at_send,
                claim_result& result) {
  auto& st = self->state;
  --st.claims_in_flight;
  st.claiming_rows -= limit;
  st.claiming_bytes -= budget;
  {
    auto rtt = self->clock().now() - st.claim_sent_at;
    st.claim_time += rtt;
    if (st.claim_rtts.size() < 100000)
      st.claim_rtts.push_back(
        std::chrono::duration_cast<std::chrono::microseconds>(rtt).count());
  }
  if (st.claim_backoff.failures() > 0)
    spdlog::info("poller[{}]: claiming again after {} failed attempt(s)",
                 st.cfg.queue, st.claim_backoff.failures());
  st.claim_backoff.reset();
  st.claimed += result.jobs.size();
  auto now = self->clock().now();
  if (st.phase == poller_phase::running && st.paused) {
    // Sent before the pause arrived: what it claimed never starts and goes
    // back; the pause's probe timer stays as it is.
    std::vector<held_job> jobs;
    for (auto& job : result.jobs)
      jobs.push_back(held(job.id, job.lease, now));
    release_jobs(self, std::move(jobs), false);
    return;
  }
  if (st.phase == poller_phase::running && result.paused) {
    enter_pause(self, "found on a claim");
    return;
  }
  if (st.phase != poller_phase::running) {
    // Claimed while shutting down: never started, handed back.
    std::vector<held_job> jobs;
    for (auto& job : result.jobs)
      jobs.push_back(held(job.id, job.lease, now));
    release_jobs(self, std::move(jobs), false);
    expire_if_overdue(self);
    maybe_finish_drain(self);
    return;
  }
  auto n = static_cast<int>(result.jobs.size());
  drop_reclaimed(self, result, now);
  note_claim_blocked(self, result.blocked_by, now);
  // A full claim means more jobs are probably due right now. When the jobs
  // of the last claims started soon after they arrived, the handlers keep
  // up with more: buffer twice as many.
  bool full = n >= limit || result.byte_bound;
  if (full && st.recent_wait < defaults::prefetch_horizon / 8)
    st.prefetch = std::min(st.prefetch * 2, st.cfg.local_queue_size);
  st.recent_wait = {};
  // A wake-up that came while this claim was in flight may be about work
  // committed after the claim's snapshot: it still counts.
  // Jobs behind a stuck claim lock may be due: claim again (the lock wait
  // paces it).
  st.maybe_more = full || st.wakes != wakes_at_send || st.claim_blocked;
  for (auto& job : result.jobs) {
    st.buffer_bytes += job.bytes();
    st.buffer.push_back({std::move(job), now});
  }
  if (result.limited) {
    // A cluster-wide limit binds: claim again when one of our outcomes
    // commits, or when the rate window frees (at the latest after
    // poll_interval), not at once (that would spin on the limit).
    st.limited = true;
    st.maybe_more = false;
    // The limit's timer claims without the idle permit; kept, it would
    // stop the idle polls of the gate's other queues while the limit binds.
    give_back_permit(self);
    start_jobs(self);
    auto delay = st.cfg.poll_interval;
    if (result.retry_after_ms >= 0)
      delay = std::min(delay, std::chrono::milliseconds{
                                std::max<int64_t>(1, result.retry_after_ms)});
    arm_timer(self, delay);
    return;
  }
  st.limited = false;
  // Only a poller that claims again on its own (its claim came back full,
  // or work may be waiting) can spare the idle permit. One whose claims
  // came to rest, empty or not, needs it: its jobs due by time alone
  // (retries, snoozes, scheduled) would wait for a NOTIFY that may never
  // come.
  if (n > 0 && st.maybe_more)
    give_back_permit(self);
  else
    want_permit(self);
  start_jobs(self);
  if (st.claims_in_flight == 0)
    arm_idle_timer(self);
  if (st.maybe_more)
    try_claim(self);
}

void on_claim_failed(poller_pointer self, int limit, int64_t budget,
                     const caf::error& err) {
  auto& st = self->state;
  --st.claims_in_flight;
  st.claiming_rows -= limit;
  st.claiming_bytes -= budget;
  if (st.phase != poller_phase::running) {
    expire_if_overdue(self);
    maybe_finish_drain(self);
    return;
  }
  if (st.claim == claim_phase::backing_off)
    return; // the other claim in flight failed too; one timer is enough
  auto delay = st.claim_backoff.next();
  spdlog::error("poller[{}]: claim failed, retrying in {} ms: {}",
                st.cfg.queue, delay.count(), render(err));
  st.claim = claim_phase::backing_off;
  // The backoff timer claims without the idle permit; kept, it would stop
  // the idle polls of the gate's other queues for as long as this
  // database is down (a shared gate spans databases). Asked for again once
  // a claim succeeds.
  give_back_permit(self);
  arm_timer(self, delay);
}

/// The storage actor an awaited claim goes to: one with no claim in flight
/// and the fewest of this poller's outcomes to commit (the next in turn
/// among equals). A storage actor records outcomes synchronously, a WAL
/// flush each (a millisecond or more): a claim sent to one that is busy
/// with them waits that long while an executor stands idle.
size_t least_busy_completer(const poller_state& st) {
  auto n = st.cfg.completers.size();
  std::vector<size_t> outcomes(n, 0);
  for (auto& entry : st.committing)
    ++outcomes[completer_of(entry.first, n)];
  auto load = [&](size_t i) {
    return (st.claims_at[i] > 0 ? st.committing.size() + 1 : 0) + outcomes[i];
  };
  auto best = st.next_claimer;
  for (size_t k = 1; k < n; ++k) {
    auto i = (st.next_claimer + k) % n;
    if (load(i) < load(best))
      best = i;
  }
  return best;
}

} // namespace

void try_claim(poller_pointer self) {
  auto& st = self->state;
  while (st.phase == poller_phase::running && !st.paused
         && st.claim == claim_phase::ready
         && st.claims_in_flight
              < std::min<int>(defaults::claims_in_flight,
                              static_cast<int>(st.cfg.completers.size()))) {
    auto limit = claim_room(st);
    if (limit <= 0)
      return;
    // The byte bound: what is held now and what claims in flight may bring
    // leave this much (at least one job when nothing is held or coming).
    auto held = static_cast<int64_t>(st.held_bytes()) + st.claiming_bytes;
    auto bytes = st.cfg.local_queue_bytes - held;
    if (bytes <= 0) {
      if (held > 0)
        return;
      bytes = 1;
    }
    ++st.claims_in_flight;
    st.claiming_rows += limit;
    st.claiming_bytes += bytes;
    ++st.claims;
    st.claim_sent_at = self->clock().now();
    // Awaited: an executor stands idle and nothing is buffered, so the
    // jobs start the moment they arrive.
    bool awaited = st.buffer.empty()
                   && static_cast<int>(st.running.size()) < st.cfg.concurrency;
    auto at = awaited ? least_busy_completer(st) : st.next_claimer;
    st.next_claimer = (at + 1) % st.cfg.completers.size();
    ++st.claims_at[at];
    self->request(st.cfg.completers[at], caf::infinite, claim_atom::value,
                  st.cfg.queue, int32_t{limit}, bytes,
                  static_cast<int64_t>(st.cfg.default_deadline.count()),
                  awaited)
      .then(
        [self, limit, bytes, at, wakes = st.wakes](claim_result& result) {
          --self->state.claims_at[at];
          on_claimed(self, limit, bytes, wakes, result);
        },
        [self, limit, bytes, at](caf::error& err) {
          --self->state.claims_at[at];
          on_claim_failed(self, limit, bytes, err);
        });
  }
}

void schedule_claim(poller_pointer self) {
  auto& st = self->state;
  if (st.claim != claim_phase::ready || st.phase != poller_phase::running)
    return;
  st.claim = claim_phase::queued;
  self->send(self, claim_atom::value);
}

} // namespace aw::poller_steps
