#include "actor_worker/actors/poller.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actor_worker/actors/executor.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/messages/error.hpp"

namespace aw {

namespace {

using namespace std::chrono_literals;

void arm_timer(poller_pointer self, std::chrono::milliseconds delay) {
  auto gen = ++self->state.timer_generation;
  self->delayed_send(self, delay, tick_atom::value, gen);
}

int64_t ns_since_epoch(caf::actor_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           t.time_since_epoch())
    .count();
}

held_job held(int64_t id, int64_t lease, caf::actor_clock::time_point at) {
  return held_job{id, lease, ns_since_epoch(at)};
}

void try_claim(poller_pointer self);
void schedule_claim(poller_pointer self);

/// The storage actor of `n` that records the outcome of job `id`: by the
/// id's receipt bucket (64 ids, storage/sql/functions/
/// actor_worker_complete.sql), so that a bucket's completions go to one
/// storage actor and share receipt rows, and the `jobs` view meets one
/// receipt per completed job, not one per storage actor.
size_t completer_of(int64_t id, size_t n) {
  return static_cast<size_t>(id >> 6) % n;
}
void maybe_finish_drain(poller_pointer self);

/// Hands the collected outcomes to storage, one message per storage actor.
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

/// Releases `jobs` (never charged); a drain waits for the reply.
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

/// Releases the jobs the watchdog gave up, once the database answers: a
/// failed try is tried again a heartbeat interval later. A rescue that took
/// them meanwhile wins (the release is guarded by the lease).
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

/// The buffered jobs go back at once: they never started.
void release_buffer(poller_pointer self) {
  auto& st = self->state;
  std::vector<held_job> jobs;
  for (auto& b : st.buffer)
    jobs.push_back(held(b.job.id, b.job.lease, b.claimed_at));
  st.buffer.clear();
  st.buffer_bytes = 0;
  release_jobs(self, std::move(jobs), false);
}

/// The drain budget ran out: stops the executors still running and
/// releases their jobs.
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

/// The drain budget ran out while claims were in flight: once the last is
/// back (its jobs handed back unstarted), release the running jobs.
void expire_if_overdue(poller_pointer self) {
  auto& st = self->state;
  if (st.phase == poller_phase::drain_overdue && st.claims_in_flight == 0)
    expire_drain(self);
}

/// Answers the drain request once nothing runs, no claim is in flight and
/// every release got its reply.
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

/// Starts buffered jobs while handler slots are free.
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

/// Queues `outcome` of a job this poller holds for storage; the job stays
/// leased (committing) until storage reports the commit.
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

/// An operator asked to cancel `ids` (`jobs cancel`): a buffered job ends
/// cancelled without running; a running one is cancelled through its
/// handler's token. Ids this poller does not hold are someone else's.
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

// -- the idle poll gate -----------------------------------------------------------

/// Asks the gate for a permit (once) when this poller has none.
void want_permit(poller_pointer self) {
  auto& st = self->state;
  if (!st.cfg.gate || st.permit != permit_phase::none
      || st.phase != poller_phase::running)
    return;
  st.permit = permit_phase::requested;
  self->send(st.cfg.gate, permit_atom::value, poller_actor{self});
}

/// Gives the permit back: this poller found work and need not poll idly.
void give_back_permit(poller_pointer self) {
  auto& st = self->state;
  if (!st.cfg.gate || st.permit != permit_phase::held)
    return;
  st.permit = permit_phase::none;
  self->send(st.cfg.gate, giveback_atom::value, poller_actor{self});
}

/// Arms the idle poll timer, if this poller may poll idly.
void arm_idle_timer(poller_pointer self) {
  auto& st = self->state;
  if (st.permit == permit_phase::held)
    arm_timer(self, st.cfg.poll_interval);
  else
    ++st.timer_generation; // parked: only a wake-up or a permit claims
}

// -- pause and resume ----------------------------------------------------------

/// The queue was paused: claim nothing more, hand the buffered jobs back
/// unstarted (never charged), let running jobs finish, and ask again every
/// poll_interval whether the pause holds.
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

/// The queue was resumed: claim at once.
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

/// Asks storage, with a claim of no jobs, whether the queue is paused (a
/// paused queue says so whatever the limit).
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

/// Claims once the messages already in the mailbox (more finished jobs,
/// more wake-ups) have been handled, so a burst becomes one claim.
void schedule_claim(poller_pointer self) {
  auto& st = self->state;
  if (st.claim != claim_phase::ready || st.phase != poller_phase::running)
    return;
  st.claim = claim_phase::queued;
  self->send(self, claim_atom::value);
}

} // namespace

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
  // An executor that died of a bug: its job is left to its lease (no
  // longer heartbeated, it is rescued and charged), its slot is free.
  self->set_down_handler([self](caf::down_msg& dm) {
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
  });
  if (st.permit == permit_phase::held)
    schedule_claim(self);
  else
    want_permit(self);
  self->delayed_send(self, st.cfg.report_interval, report_atom::value);
  return {
    [self](wake_atom) {
      ++self->state.wakes;
      self->state.maybe_more = true;
      schedule_claim(self);
    },
    [self](done_atom, int64_t id, bool record, job_outcome& outcome) {
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
    },
    [self](flush_atom) { flush_outbox(self); },
    [self](started_atom) {
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
    },
    [self](committed_atom, std::vector<outcome_report>& reports) {
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
    },
    [self](tick_atom, uint64_t gen) {
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
    },
    [self](claim_atom) {
      auto& st = self->state;
      if (st.claim == claim_phase::queued)
        st.claim = claim_phase::ready;
      try_claim(self);
    },
    [self](drain_atom) -> caf::result<int64_t> {
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
    },
    [self](report_atom) {
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
    },
    [self](running_atom) -> std::vector<held_job> {
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
    },
    [self](lost_atom, const std::vector<int64_t>& ids,
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
    },
    [self](hand_back_atom) {
      hand_back(self);
    },
    [self](cancel_atom, const std::vector<int64_t>& ids) {
      cancel_on_request(self, ids);
    },
    [self](permit_atom) {
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
    },
    [self](pause_atom, bool paused) {
      if (paused)
        enter_pause(self, "told by NOTIFY");
      else
        leave_pause(self, "told by NOTIFY");
    },
    [self](drained_atom) {
      auto& st = self->state;
      if (st.phase != poller_phase::draining)
        return;
      if (st.claims_in_flight > 0)
        st.phase = poller_phase::drain_overdue; // expire_drain when back
      else
        expire_drain(self);
    },
  };
}

} // namespace aw
