#include "actor_worker/actors/storage.hpp"

#include <map>

#include <spdlog/spdlog.h>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/storage/db_error.hpp"
#include "actor_worker/storage/schema_check.hpp"

namespace aw {

namespace {

/// Runs `fn` against the store; on failure drops the connection when it
/// broke, logs, and returns the error.
template <class F>
auto guarded(storage_pointer self, const char* what, F fn)
  -> caf::result<decltype(fn())> {
  try {
    return fn();
  } catch (const std::exception& e) {
    auto err = storage::to_error(e, what);
    if (storage::classify(e) == ec::database_unavailable)
      self->state.store->disconnect();
    spdlog::error("storage: {}", render(err));
    return err;
  }
}

/// Hands a committed transition to the hook dispatcher: only transitions of
/// observed kinds carry their row, and only those have anyone to hear them.
void publish(storage_pointer self, job_event&& e) {
  auto& d = self->state.dispatcher;
  if (d && !e.job_json.empty())
    self->send(d, std::move(e));
}

/// Rescue follow-ups are best effort, after the rescue committed: a failing
/// follow-up must never leave a job stuck.
void rescue_follow_ups(storage_pointer self,
                       const std::vector<job_event>& events) {
  if (events.empty())
    return;
  try {
    self->state.store->enqueue_follow_ups(events);
  } catch (const std::exception& e) {
    if (storage::classify(e) == ec::database_unavailable)
      self->state.store->disconnect();
    spdlog::error("storage: rescue follow-ups failed (the rescues stand): {}",
                  storage::one_line(e));
  }
}

/// What became of the outcomes pending[first .. first + count): reports to
/// their pollers (one message per poller), events to the hooks.
void deliver(storage_pointer self, size_t first, size_t count,
             std::vector<storage::finish_report>& reports) {
  auto& st = self->state;
  std::map<caf::actor_addr, std::pair<poller_actor, std::vector<outcome_report>>>
    by_poller;
  std::vector<job_event> rescues;
  for (size_t i = 0; i < count; ++i) {
    auto& p = st.pending[first + i];
    auto& r = reports[i];
    if (r.result == finish_result::stale)
      spdlog::warn("storage: outcome of job {} not recorded: the run is no "
                   "longer this worker's",
                   p.outcome.job_id);
    auto& entry = by_poller[p.poller.address()];
    entry.first = p.poller;
    entry.second.push_back({p.outcome.job_id, p.outcome.kind, r.result});
    if (r.has_event && r.event.type == event_type::rescued)
      rescues.push_back(r.event);
  }
  rescue_follow_ups(self, rescues);
  for (size_t i = 0; i < count; ++i)
    if (reports[i].has_event)
      publish(self, std::move(reports[i].event));
  for (auto& [addr, entry] : by_poller)
    if (entry.first)
      self->send(entry.first, committed_atom::value, std::move(entry.second));
}

/// An outcome the database refuses on its own, for a reason that is not
/// connectivity (typically a follow-up whose callable threw or whose INSERT
/// failed, which rolled the transition back): record the run as a
/// retryable failure instead, so the job runs again later. If even that
/// fails, the job stays running until its lease is reclaimed.
void record_instead(storage_pointer self, size_t i, const std::exception& e) {
  auto& st = self->state;
  auto& outcome = st.pending[i].outcome;
  auto why = storage::one_line(e);
  spdlog::error("storage: cannot record the {} outcome of job {}, recording "
                "a retryable failure instead: {}",
                to_string(outcome.kind), outcome.job_id, why);
  job_outcome failure = outcome;
  failure.kind = outcome_kind::retryable_failure;
  failure.message = "recording the outcome (" + std::string{to_string(outcome.kind)}
                    + ") failed: " + why;
  failure.delay_ms = 0;
  try {
    auto reports = st.store->finish({failure});
    deliver(self, i, 1, reports);
  } catch (const std::exception& again) {
    if (storage::classify(again) == ec::database_unavailable)
      throw;
    spdlog::error("storage: cannot record the outcome of job {}: {}; it "
                  "stays running until its lease is reclaimed",
                  outcome.job_id, storage::one_line(again));
    std::vector<storage::finish_report> stale(1);
    deliver(self, i, 1, stale);
  }
}

/// A batch failed for a reason other than connectivity: commit the outcomes
/// one by one, so one bad outcome cannot hold up the others forever. One
/// that still fails alone is recorded as a retryable failure instead.
void flush_one_by_one(storage_pointer self) {
  auto& st = self->state;
  for (size_t i = 0; i < st.pending.size(); ++i) {
    try {
      try {
        auto reports = st.store->finish({st.pending[i].outcome}, st.in_doubt);
        deliver(self, i, 1, reports);
      } catch (const std::exception& e) {
        if (storage::classify(e) == ec::database_unavailable)
          throw;
        record_instead(self, i, e);
      }
    } catch (const std::exception&) {
      // Keep only what is not recorded yet for the retry.
      st.pending.erase(st.pending.begin(), st.pending.begin() + i);
      throw;
    }
  }
}

void flush_pending(storage_pointer self);

void flush(storage_pointer self) {
  flush_pending(self);
  *self->state.unrecorded = self->state.pending.size();
}

void flush_pending(storage_pointer self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.pending.empty())
    return;
  std::vector<job_outcome> batch;
  batch.reserve(st.pending.size());
  for (auto& p : st.pending)
    batch.push_back(p.outcome);
  try {
    try {
      auto reports = st.store->finish(batch, st.in_doubt);
      deliver(self, 0, batch.size(), reports);
    } catch (const std::exception& e) {
      if (storage::classify(e) == ec::database_unavailable || batch.size() < 2)
        throw;
      spdlog::error("storage: recording a batch of {} outcomes failed, "
                    "recording them one by one: {}",
                    batch.size(), storage::one_line(e));
      flush_one_by_one(self);
    }
    st.pending.clear();
    st.in_doubt = false;
    if (st.flush_backoff.failures() > 0)
      spdlog::info("storage: recording outcomes again after {} failed "
                   "attempt(s)",
                   st.flush_backoff.failures());
    st.flush_backoff.reset();
  } catch (const std::exception& e) {
    if (storage::classify(e) == ec::database_unavailable) {
      st.in_doubt = true;
      st.store->disconnect();
    } else if (st.pending.size() == 1) {
      // A single outcome the database rejects for good.
      try {
        record_instead(self, 0, e);
        st.pending.clear();
        return;
      } catch (const std::exception&) {
        st.store->disconnect(); // unreachable now: retry the original
      }
    }
    auto delay = st.flush_backoff.next();
    spdlog::error("storage: recording {} outcome(s) failed, retrying in {} "
                  "ms: {}",
                  st.pending.size(), delay.count(), storage::one_line(e));
    st.flush_scheduled = true;
    self->delayed_send(self, delay, flush_atom::value);
  }
}

} // namespace

storage_actor::behavior_type storage_behavior(storage_pointer self,
                                              storage::job_store_options opts,
                                              storage_extras extras) {
  self->state.store = std::make_unique<storage::job_store>(std::move(opts));
  self->state.store->observe(extras.observed_kinds);
  self->state.store->set_follow_ups(std::move(extras.follow_ups));
  self->state.dispatcher = std::move(extras.dispatcher);
  self->attach_functor([unrecorded = self->state.unrecorded] {
    if (*unrecorded > 0)
      spdlog::warn("storage: stopping with {} unrecorded outcome(s); those "
                   "jobs stay running until their lease is reclaimed",
                   *unrecorded);
  });
  return {
    [self](claim_atom, const std::string& queue, int32_t limit,
           int64_t max_bytes,
           int64_t default_deadline_ms) -> caf::result<claim_result> {
      auto& st = self->state;
      // Outcomes waiting for a flush commit with this claim when they can:
      // one round trip and one commit instead of two.
      if (!st.pending.empty()) {
        std::vector<job_outcome> batch;
        batch.reserve(st.pending.size());
        for (auto& p : st.pending)
          batch.push_back(p.outcome);
        if (storage::job_store::fusable(batch)) {
          try {
            auto [reports, claimed] = st.store->finish_and_claim(
              batch, queue, limit, max_bytes, default_deadline_ms,
              st.in_doubt);
            deliver(self, 0, batch.size(), reports);
            st.pending.clear();
            st.in_doubt = false;
            *st.unrecorded = 0;
            st.flush_backoff.reset();
            return std::move(claimed);
          } catch (const std::exception& e) {
            auto err = storage::to_error(e, "recording outcomes and claiming");
            if (storage::classify(e) == ec::database_unavailable) {
              st.in_doubt = true;
              st.store->disconnect();
              spdlog::error("storage: {}", render(err));
              return err; // the outcomes stay pending; flush retries them
            }
            // Record them on their own (splitting what the database
            // refuses), then claim.
          }
        }
        flush(self);
      }
      return guarded(self, "claiming jobs", [&] {
        return st.store->claim(queue, limit, max_bytes, default_deadline_ms);
      });
    },
    [self](heartbeat_atom, const std::vector<int64_t>& jobs,
           const std::vector<int64_t>& batches)
      -> caf::result<std::vector<int64_t>, std::vector<int64_t>> {
      try {
        auto alive = self->state.store->heartbeat(jobs, batches);
        return {std::move(alive.jobs), std::move(alive.batches)};
      } catch (const std::exception& e) {
        auto err = storage::to_error(e, "refreshing leases");
        if (storage::classify(e) == ec::database_unavailable)
          self->state.store->disconnect();
        spdlog::error("storage: {}", render(err));
        return err;
      }
    },
    [self](rescue_atom) -> caf::result<std::vector<rescued_job>> {
      std::vector<rescued_job> rescued;
      try {
        rescued = self->state.store->rescue(defaults::rescue_batch);
      } catch (const std::exception& e) {
        auto err = storage::to_error(e, "rescuing expired jobs");
        if (storage::classify(e) == ec::database_unavailable)
          self->state.store->disconnect();
        spdlog::error("storage: {}", render(err));
        return err;
      }
      std::vector<job_event> events;
      for (auto& r : rescued) {
        job_event e;
        e.type = event_type::rescued;
        e.kind = r.kind;
        e.job_json = r.job_json;
        e.message = r.message;
        e.reason = r.reason;
        events.push_back(std::move(e));
      }
      rescue_follow_ups(self, events);
      for (auto& e : events)
        publish(self, std::move(e));
      return rescued;
    },
    [self](finish_atom, std::vector<job_outcome>& outcomes,
           poller_actor& poller) {
      auto& st = self->state;
      for (auto& o : outcomes)
        st.pending.push_back({std::move(o), poller});
      *st.unrecorded = st.pending.size();
      if (!st.flush_scheduled) {
        st.flush_scheduled = true;
        self->send(self, flush_atom::value);
      }
    },
    [self](release_atom, const std::vector<held_job>& jobs,
           bool started) -> caf::result<int64_t> {
      // Outcomes that arrived before the release commit first, so a job
      // that finished within the drain keeps its outcome.
      flush(self);
      return guarded(self, "releasing jobs", [&] {
        return self->state.store->release(jobs, started);
      });
    },
    [self](cleanup_atom) -> caf::result<int64_t> {
      return guarded(self, "deleting expired finished jobs", [&] {
        return self->state.store->delete_expired(defaults::cleanup_batch);
      });
    },
    [self](vacuum_atom) -> caf::result<std::vector<std::string>> {
      return guarded(self, "vacuuming the queue tables", [&] {
        return self->state.store->vacuum(defaults::vacuum_min_dead,
                                         defaults::vacuum_dead_share);
      });
    },
    [self](check_atom) -> caf::result<bool> {
      try {
        auto missing = storage::missing_schema(self->state.store->connection());
        if (missing.empty())
          return true;
        return make_error(ec::schema_outdated,
                          storage::describe_missing_schema(missing));
      } catch (const std::exception& e) {
        self->state.store->disconnect();
        return storage::to_error(e, "checking the database schema");
      }
    },
    [self](flush_atom) { flush(self); },
  };
}

} // namespace aw
