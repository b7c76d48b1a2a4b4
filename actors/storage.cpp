#include "actors/storage.hpp"

#include <spdlog/spdlog.h>

#include "messages/error.hpp"
#include "storage/db_error.hpp"
#include "storage/schema_check.hpp"

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

/// Delivers each result and reports stale ones.
void deliver(storage_pointer self, size_t first, size_t count,
             const std::vector<finish_result>& results) {
  auto& st = self->state;
  for (size_t i = 0; i < count; ++i) {
    auto& [outcome, promise] = st.pending[first + i];
    if (results[i] == finish_result::stale)
      spdlog::warn("storage: outcome of job {} not recorded: the job is no "
                   "longer running under this worker",
                   outcome.job_id);
    promise.deliver(results[i]);
  }
}

/// A batch failed for a reason other than connectivity: commit the outcomes
/// one by one, so one bad outcome cannot hold up the others forever. One
/// that still fails alone is reported at ERROR and dropped; its job stays
/// running until its lease is reclaimed.
void flush_one_by_one(storage_pointer self) {
  auto& st = self->state;
  for (size_t i = 0; i < st.pending.size(); ++i) {
    try {
      auto results = st.store->finish({st.pending[i].first});
      deliver(self, i, 1, results);
    } catch (const std::exception& e) {
      if (storage::classify(e) == ec::database_unavailable) {
        // Keep only what is not recorded yet for the retry.
        st.pending.erase(st.pending.begin(), st.pending.begin() + i);
        throw;
      }
      spdlog::error("storage: cannot record the outcome of job {}: {}",
                    st.pending[i].first.job_id, storage::one_line(e));
      st.pending[i].second.deliver(finish_result::stale);
    }
  }
}

void flush(storage_pointer self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (st.pending.empty())
    return;
  std::vector<job_outcome> batch;
  batch.reserve(st.pending.size());
  for (auto& p : st.pending)
    batch.push_back(p.first);
  try {
    try {
      auto results = st.store->finish(batch);
      deliver(self, 0, batch.size(), results);
    } catch (const std::exception& e) {
      if (storage::classify(e) == ec::database_unavailable || batch.size() < 2)
        throw;
      spdlog::error("storage: recording a batch of {} outcomes failed, "
                    "recording them one by one: {}",
                    batch.size(), storage::one_line(e));
      flush_one_by_one(self);
    }
    st.largest_batch = std::max(st.largest_batch, batch.size());
    st.pending.clear();
    if (st.flush_backoff.failures() > 0)
      spdlog::info("storage: recording outcomes again after {} failed "
                   "attempt(s)",
                   st.flush_backoff.failures());
    st.flush_backoff.reset();
  } catch (const std::exception& e) {
    if (storage::classify(e) == ec::database_unavailable) {
      st.store->disconnect();
    } else if (batch.size() == 1) {
      // A single outcome the database rejects for good: see flush_one_by_one.
      spdlog::error("storage: cannot record the outcome of job {}: {}",
                    batch.front().job_id, storage::one_line(e));
      st.pending.front().second.deliver(finish_result::stale);
      st.pending.clear();
      return;
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
                                              storage::job_store_options opts) {
  self->state.store = std::make_unique<storage::job_store>(std::move(opts));
  self->attach_functor([self] {
    if (!self->state.pending.empty())
      spdlog::warn("storage: stopping with {} unrecorded outcome(s); those "
                   "jobs stay running until their lease is reclaimed",
                   self->state.pending.size());
  });
  return {
    [self](claim_atom, const std::string& queue, int32_t limit,
           int64_t default_deadline_ms) -> caf::result<std::vector<claimed_job>> {
      return guarded(self, "claiming jobs", [&] {
        return self->state.store->claim(queue, limit, default_deadline_ms);
      });
    },
    [self](heartbeat_atom, const std::vector<int64_t>& ids)
      -> caf::result<std::vector<int64_t>> {
      return guarded(self, "refreshing leases",
                     [&] { return self->state.store->heartbeat(ids); });
    },
    [self](rescue_atom) -> caf::result<std::vector<rescued_job>> {
      return guarded(self, "rescuing expired jobs", [&] {
        return self->state.store->rescue(defaults::rescue_batch);
      });
    },
    [self](finish_atom, job_outcome& outcome) -> caf::result<finish_result> {
      auto& st = self->state;
      auto promise = self->make_response_promise<finish_result>();
      st.pending.emplace_back(std::move(outcome), promise);
      if (!st.flush_scheduled) {
        st.flush_scheduled = true;
        self->send(self, flush_atom::value);
      }
      return promise;
    },
    [self](release_atom,
           const std::vector<int64_t>& ids) -> caf::result<int64_t> {
      // Outcomes that arrived before the release commit first, so a job
      // that finished within the drain keeps its outcome.
      flush(self);
      return guarded(self, "releasing jobs",
                     [&] { return self->state.store->release(ids); });
    },
    [self](cleanup_atom) -> caf::result<int64_t> {
      return guarded(self, "deleting expired completed jobs", [&] {
        return self->state.store->delete_expired(defaults::cleanup_batch);
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
