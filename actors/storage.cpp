#include "actor_worker/actors/storage.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/actors/internal/storage_steps.hpp"
#include "actor_worker/actors/job_log.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"

namespace aw {

namespace storage_steps {

bool unavailable(const caf::error& err) {
  if (err.category() != error_category_atom)
    return false;
  auto code = static_cast<ec>(err.code());
  return code == ec::database_unavailable
         || code == ec::database_misconfigured;
}

void observe(const storage_state& st, const char* operation,
             const caf::error& err) {
  if (!st.watcher)
    return;
  if (!err) {
    st.watcher->database_reachable(true);
    return;
  }
  st.watcher->database_error(operation);
  if (unavailable(err))
    st.watcher->database_reachable(false);
}

namespace {

/// A backend result as a reply, its error logged at ERROR on the way and
/// reported to the observer.
template <class T>
caf::result<T> logged(const storage_state& st, const char* operation,
                      caf::expected<T>&& x) {
  if (x) {
    observe(st, operation, caf::error{});
    return std::move(*x);
  }
  observe(st, operation, x.error());
  spdlog::error("storage: {}", render(x.error()));
  return std::move(x.error());
}

/// Claimed jobs for the observer: how many, and (when it wants them) how
/// long each waited since it became due, read in one more statement.
void observe_claim(storage_state& st, const std::string& queue,
                   claim_result& r) {
  if (!st.watcher)
    return;
  st.watcher->claimed(queue, r.jobs.size());
  if (r.jobs.empty() || !st.watcher->wants_wait_times())
    return;
  std::vector<int64_t> ids;
  ids.reserve(r.jobs.size());
  for (auto& j : r.jobs)
    ids.push_back(j.id);
  auto waits = st.store->wait_times(ids);
  if (!waits) {
    // Only a metric is missing: the claim stands.
    observe(st, "wait_times", waits.error());
    return;
  }
  std::unordered_map<int64_t, double> by_id(waits->begin(), waits->end());
  for (auto& j : r.jobs)
    if (auto i = by_id.find(j.id); i != by_id.end())
      j.claim_wait_seconds = std::max(0.0, i->second);
}

/// Says in the log that a claim left jobs of kinds without a handler here
/// for other workers: at most once a minute per queue and kind, with the
/// count since the last time (a backlog of such jobs is set aside claim by
/// claim).
void log_set_aside(storage_state& st, const std::string& queue,
                   const claim_result& r) {
  auto now = std::chrono::steady_clock::now();
  for (auto& s : r.set_aside) {
    auto [it, first] = st.set_aside.try_emplace({queue, s.kind});
    auto& log = it->second;
    log.unreported += s.count;
    if (!first && now - log.logged_at < std::chrono::minutes{1})
      continue;
    spdlog::warn("queue '{}': {} job(s) of kind '{}' left available for "
                 "other workers: no handler for that kind on this one (they "
                 "wait for a worker that has one)",
                 printable(queue), log.unreported, printable(s.kind));
    log.logged_at = now;
    log.unreported = 0;
  }
}

/// Logs and observes a claim's result: errors, set-aside jobs, counts.
void note_claim(storage_state& st, const std::string& queue,
                caf::expected<claim_result>& x) {
  if (!x) {
    observe(st, "claim", x.error());
    spdlog::error("storage: {}", render(x.error()));
    return;
  }
  if (!x->set_aside.empty())
    log_set_aside(st, queue, *x);
  observe_claim(st, queue, *x);
  observe(st, "claim", caf::error{});
}

/// A claim's result as a reply, noted.
caf::result<claim_result> claimed(storage_state& st, const std::string& queue,
                                  caf::expected<claim_result>&& x) {
  note_claim(st, queue, x);
  if (x)
    return std::move(*x);
  return std::move(x.error());
}

} // namespace

std::vector<job_outcome> pending_outcomes(const storage_state& st) {
  std::vector<job_outcome> out;
  out.reserve(st.pending.size());
  for (auto& p : st.pending)
    out.push_back(p.outcome);
  return out;
}

} // namespace storage_steps

using namespace storage_steps;

namespace {

// -- the storage actor's messages ------------------------------------------------

/// Claims for a poller; outcomes waiting for a flush commit with the claim
/// (or, when handlers wait for the jobs, right after it).
caf::result<claim_result> claim(storage_pointer self, std::string& queue, int32_t limit,
                                int64_t max_bytes, int64_t default_deadline_ms,
                                bool awaited) {
  auto& st = self->state;
  storage::claim_request req{std::move(queue), limit, max_bytes,
                             default_deadline_ms};
  if (!st.pending.empty() && awaited) {
    // Handlers wait for these jobs: the claim (which commits without
    // waiting for its WAL flush) answers first, and the outcomes
    // (which wait for theirs, a millisecond or more) commit after.
    auto rp = self->make_response_promise<claim_result>();
    auto result = st.store->claim(req);
    note_claim(st, req.queue, result);
    if (result)
      rp.deliver(std::move(*result));
    else
      rp.deliver(std::move(result.error()));
    flush(self);
    return rp;
  }
  // Outcomes waiting for a flush commit with this claim: one round
  // trip and one commit instead of two.
  if (!st.pending.empty()) {
    auto batch = pending_outcomes(st);
    {
      auto fused = st.store->finish_and_claim(batch, req, st.in_doubt);
      if (fused) {
        deliver(self, st.pending.data(), batch.size(), fused->first);
        st.pending.clear();
        st.in_doubt = false;
        *st.unrecorded = 0;
        st.flush_backoff.reset();
        if (!fused->second.set_aside.empty())
          log_set_aside(st, req.queue, fused->second);
        observe(st, "finish_and_claim", caf::error{});
        observe_claim(st, req.queue, fused->second);
        return std::move(fused->second);
      }
      if (unavailable(fused.error())) {
        // The outcomes stay pending (perhaps committed): the flush
        // already on its way retries them.
        st.in_doubt = true;
        observe(st, "finish_and_claim", fused.error());
        spdlog::error("storage: {}", render(fused.error()));
        return std::move(fused.error());
      }
      // Refused: record them on their own (splitting what the
      // database refuses), then claim.
    }
    flush(self);
  }
  return claimed(st, req.queue, st.store->claim(req));
}

/// Extends the leases; replies with those still held.
caf::result<std::vector<int64_t>>
heartbeat(storage_pointer self, const std::vector<int64_t>& leases) {
  auto alive = self->state.store->heartbeat(leases);
  observe(self->state, "heartbeat", alive ? caf::error{} : alive.error());
  if (!alive) {
    spdlog::error("storage: {}", render(alive.error()));
    return std::move(alive.error());
  }
  return std::move(*alive);
}

/// Rescues a batch of expired leases, deadlines and callbacks; their
/// follow-ups and events come after the commit.
caf::result<std::vector<rescued_job>> rescue(storage_pointer self) {
  auto rescued = self->state.store->rescue(defaults::rescue_batch);
  if (!rescued)
    return logged(self->state, "rescue", std::move(rescued));
  observe(self->state, "rescue", caf::error{});
  if (auto& w = self->state.watcher)
    for (auto& r : *rescued)
      w->rescued(r);
  std::vector<job_event> events;
  for (auto& r : *rescued) {
    job_event e;
    e.type = event_type::rescued;
    e.kind = r.kind;
    e.job_json = r.job_json;
    e.message = r.message;
    e.reason = r.reason;
    events.push_back(std::move(e));
  }
  follow_ups_after_commit(self, events, "rescue", "rescues");
  for (auto& e : events)
    publish(self, std::move(e));
  return std::move(*rescued);
}

/// Outcomes from a poller join the next flush; those a transactional
/// handler committed with its writes are only reported.
void accept_outcomes(storage_pointer self, std::vector<job_outcome>& outcomes,
                     poller_actor& poller) {
  auto& st = self->state;
  // A transactional handler's outcome committed with its writes: it
  // is only reported, as if this actor had recorded it.
  std::vector<pending_outcome> committed;
  std::vector<storage::finish_report> reports;
  for (auto& o : outcomes) {
    if (o.record != outcome_record::committed) {
      st.pending.push_back({std::move(o), poller});
      continue;
    }
    storage::finish_report r;
    r.result = finish_result::applied;
    r.has_event = o.has_event;
    r.event = std::move(o.event);
    r.has_resolution = o.has_resolution;
    r.resolution = std::move(o.resolution);
    reports.push_back(std::move(r));
    committed.push_back({std::move(o), poller});
  }
  if (!committed.empty())
    deliver(self, committed.data(), committed.size(), reports);
  *st.unrecorded = st.pending.size();
  if (st.pending.empty())
    return;
  if (!st.flush_scheduled) {
    st.flush_scheduled = true;
    self->send(self, flush_atom::value);
  }
}

/// Releases `jobs` without charging an attempt, after the outcomes that
/// arrived before.
caf::result<int64_t> release(storage_pointer self, const std::vector<held_job>& jobs,
                             bool started) {
  // Outcomes that arrived before the release commit first, so a job
  // that finished within the drain keeps its outcome.
  flush(self);
  if (jobs.empty())
    return int64_t{0};
  return logged(self->state, "release",
                self->state.store->release(jobs, started));
}

/// Records that `jobs` started (best effort).
void record_starts(storage_pointer self, const std::vector<held_job>& jobs) {
  auto& st = self->state;
  auto failure = st.store->record_starts(jobs);
  observe(st, "record_starts", failure);
  if (failure)
    // Best effort: those jobs go back uncharged should this worker
    // die, and their next claim records their start.
    spdlog::warn("storage: recording that {} job(s) started failed: {}",
                 jobs.size(), render(failure));
}

/// Samples the queues for the metrics; replies with how many.
caf::result<int64_t> sample_queues(storage_pointer self) {
  auto& st = self->state;
  auto samples = st.store->sample_queues();
  if (samples && st.watcher)
    st.watcher->sampled(*samples);
  caf::expected<int64_t> count{samples ? static_cast<int64_t>(samples->size())
                                       : int64_t{0}};
  if (!samples)
    count = std::move(samples.error());
  return logged(st, "sample_queues", std::move(count));
}

/// Applies this node's queue controls; logs what changed.
caf::result<std::vector<std::string>> apply_controls(storage_pointer self) {
  auto& st = self->state;
  auto changes = st.store->apply_queue_controls();
  if (changes)
    for (auto& c : *changes)
      spdlog::warn("queue_controls: this node's configuration changed "
                   "{} (the last node started wins)",
                   c);
  return logged(st, "apply_queue_controls", std::move(changes));
}

/// Removes this node's row (at shutdown).
caf::result<bool> leave(storage_pointer self) {
  auto err = self->state.store->leave();
  observe(self->state, "leave", err);
  if (err) {
    spdlog::warn("storage: {} (the row goes with the next cleanup)",
                 render(err));
    return err;
  }
  return true;
}

} // namespace

// -- the behaviour -----------------------------------------------------------------

storage_internal::behavior_type
storage_behavior(storage_pointer self, std::shared_ptr<storage::backend> store,
                 hook_dispatcher_actor dispatcher,
                 std::shared_ptr<observer> watcher) {
  self->state.store = std::move(store);
  self->state.dispatcher = std::move(dispatcher);
  self->state.watcher = std::move(watcher);
  self->attach_functor([unrecorded = self->state.unrecorded] {
    if (*unrecorded > 0)
      spdlog::warn("storage: stopping with {} unrecorded outcome(s); those "
                   "jobs stay running until their lease is reclaimed",
                   *unrecorded);
  });
  return {
    [self](claim_atom, std::string& queue, int32_t limit, int64_t max_bytes,
           int64_t default_deadline_ms,
           bool awaited) -> caf::result<claim_result> {
      return claim(self, queue, limit, max_bytes, default_deadline_ms, awaited);
    },
    [self](heartbeat_atom, const std::vector<int64_t>& leases)
      -> caf::result<std::vector<int64_t>> {
      return heartbeat(self, leases);
    },
    [self](cancel_atom, const std::vector<int64_t>& jobs)
      -> caf::result<std::vector<int64_t>> {
      return logged(self->state, "cancel_requests",
                    self->state.store->cancel_requests(jobs));
    },
    [self](rescue_atom) -> caf::result<std::vector<rescued_job>> {
      return rescue(self);
    },
    [self](finish_atom, std::vector<job_outcome>& outcomes,
           poller_actor& poller) {
      accept_outcomes(self, outcomes, poller);
    },
    [self](release_atom, const std::vector<held_job>& jobs,
           bool started) -> caf::result<int64_t> {
      return release(self, jobs, started);
    },
    [self](started_atom, const std::vector<held_job>& jobs) {
      record_starts(self, jobs);
    },
    [self](cleanup_atom) -> caf::result<int64_t> {
      return logged(self->state, "cleanup",
                    self->state.store->delete_expired(defaults::cleanup_batch));
    },
    [self](vacuum_atom) -> caf::result<std::vector<std::string>> {
      return logged(self->state, "vacuum",
                    self->state.store->vacuum(defaults::vacuum_min_dead,
                                              defaults::vacuum_dead_share));
    },
    [self](check_atom) -> caf::result<bool> {
      if (auto err = self->state.store->check_schema())
        return err;
      return true;
    },
    [self](sample_atom) -> caf::result<int64_t> { return sample_queues(self); },
    [self](node_atom, int64_t held, bool candidate) -> caf::result<bool> {
      return logged(self->state, "refresh_node",
                    self->state.store->refresh_node(held, candidate));
    },
    [self](resign_atom) -> caf::result<bool> {
      return logged(self->state, "resign", self->state.store->resign());
    },
    [self](controls_atom) -> caf::result<std::vector<std::string>> {
      return apply_controls(self);
    },
    [self](leave_atom) -> caf::result<bool> { return leave(self); },
    [self](periodic_atom) -> caf::result<std::vector<periodic_row>> {
      return logged(self->state, "periodic_rows",
                    self->state.store->periodic_rows());
    },
    [self](periodic_atom, const periodic_tick& tick) -> caf::result<int64_t> {
      return logged(self->state, "enqueue_tick",
                    self->state.store->enqueue_tick(tick));
    },
    [self](flush_atom) { flush(self); },
  };
}

} // namespace aw
