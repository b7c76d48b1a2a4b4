// The storage actor's outcomes (actors/internal/storage_steps.hpp): the
// flush that commits a batch, splitting off what the database refuses,
// reports to the pollers, events to the hooks and follow-ups after commit.

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

namespace aw::storage_steps {

void publish(storage_pointer self, job_event&& e) {
  auto& d = self->state.dispatcher;
  if (d && !e.job_json.empty())
    self->send(d, std::move(e));
}

void follow_ups_after_commit(storage_pointer self,
                             const std::vector<job_event>& events,
                             const char* stage, const char* standing) {
  if (events.empty())
    return;
  if (auto err = self->state.store->enqueue_follow_ups(events)) {
    spdlog::error("storage: {} follow-ups failed (the {} stand): {}", stage,
                  standing, render(err));
    if (auto& w = self->state.watcher)
      w->follow_ups_failed(stage);
  }
}

namespace {

/// Where a failed job went, from the committed row of its transition: a
/// dead letter row (it has original_job_id), or the job's row with the
/// run_at of its next attempt.
struct failure_destination {
  bool dead_lettered = false;
  std::string run_at = "a later time";
};

failure_destination destination_of(const storage::finish_report& r) {
  failure_destination out;
  if (!r.has_event)
    return out;
  out.dead_lettered = r.event.type == event_type::exhausted;
  try {
    auto row = nlohmann::json::parse(r.event.job_json);
    if (row.contains("original_job_id"))
      out.dead_lettered = true;
    else if (auto i = row.find("run_at"); i != row.end() && i->is_string())
      out.run_at = i->get<std::string>();
  } catch (const std::exception&) {
    // no row to read (a test's backend): the event type says enough
  }
  return out;
}

/// `text` ready for a log line: itself, or escaped into `buf` when it holds
/// a byte printable() escapes (names never do: the schema forbids control
/// characters in them).
std::string_view loggable(const std::string& text, std::string& buf) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7f || c == '\\') {
      buf = printable(text);
      return buf;
    }
  return text;
}

/// Where a recorded outcome took its job, for the metrics.
execution_result result_of(const job_outcome& o,
                           const storage::finish_report& r) {
  if (r.result == finish_result::stale)
    return execution_result::lost;
  switch (o.kind) {
    case outcome_kind::completed:
      return execution_result::completed;
    case outcome_kind::snoozed:
      return execution_result::snoozed;
    case outcome_kind::cancelled:
      return execution_result::cancelled;
    case outcome_kind::waiting_callback:
      return execution_result::parked;
    case outcome_kind::terminal_failure:
      return execution_result::dead_lettered;
    default:
      return r.has_event && r.event.type == event_type::exhausted
               ? execution_result::dead_lettered
               : execution_result::retried;
  }
}

/// One log line for a recorded outcome: completions at INFO, retries (with
/// when) at WARN, dead letters at ERROR. Names the job, its kind and queue
/// (escaped), and the attempt; JSON logs carry them as fields too.
void log_recorded(const job_outcome& o, const storage::finish_report& r) {
  std::string kind_buf;
  std::string queue_buf;
  job_ref job{o.job_id, loggable(o.job_kind, kind_buf),
              loggable(o.queue, queue_buf), o.attempt};
  // The line of nearly every job: formatted once, nothing copied.
  using spdlog::level::err;
  using spdlog::level::info;
  using spdlog::level::warn;
  switch (o.kind) {
    case outcome_kind::completed:
      log_job(info, job, "job {} (kind '{}', queue '{}', attempt {}) "
                         "completed in {} ms",
              job.id, job.kind, job.queue, job.attempt, o.duration_ms);
      return;
    case outcome_kind::snoozed:
      log_job(info, job, "job {} (kind '{}', queue '{}', attempt {}) "
                         "snoozed for {}",
              job.id, job.kind, job.queue, job.attempt,
              format_duration(std::chrono::milliseconds{o.delay_ms}));
      return;
    case outcome_kind::cancelled:
      log_job(info, job, "job {} (kind '{}', queue '{}', attempt {}) "
                         "cancelled: {}",
              job.id, job.kind, job.queue, job.attempt, printable(o.message));
      return;
    case outcome_kind::waiting_callback:
      log_job(info, job, "job {} (kind '{}', queue '{}', attempt {}) waits "
                         "for an external callback (timeout {})",
              job.id, job.kind, job.queue, job.attempt,
              format_duration(std::chrono::milliseconds{o.delay_ms}));
      return;
    case outcome_kind::terminal_failure:
      log_job(err, job, "job {} (kind '{}', queue '{}', attempt {}) failed "
                        "for good: {}; moved to the dead letter queue",
              job.id, job.kind, job.queue, job.attempt, printable(o.message));
      return;
    default: { // failures that may run again
      auto to = destination_of(r);
      if (to.dead_lettered)
        log_job(err, job, "job {} (kind '{}', queue '{}', attempt {}) "
                          "failed: {}; no attempts left: moved to the dead "
                          "letter queue",
                job.id, job.kind, job.queue, job.attempt,
                printable(o.message));
      else
        log_job(warn, job, "job {} (kind '{}', queue '{}', attempt {}) "
                           "failed: {}; retry at {}",
                job.id, job.kind, job.queue, job.attempt,
                printable(o.message), to.run_at);
    }
  }
}

} // namespace

void deliver(storage_pointer self, const pending_outcome* entries,
             size_t count, std::vector<storage::finish_report>& reports,
             storage::failure_follow_ups failures) {
  auto& st = self->state;
  std::map<caf::actor_addr, std::pair<poller_actor, std::vector<outcome_report>>>
    by_poller;
  std::vector<job_event> rescues;
  // Retries and dead-letterings recorded without their follow-ups
  // (record_instead).
  std::vector<job_event> retried, dead;
  auto left_out = [&](const job_event& e, event_type type) {
    return failures == storage::failure_follow_ups::after_commit
           && e.type == type && !e.job_json.empty();
  };
  // (Checked once: a drain of 100,000 jobs a second must not format 100,000
  // lines nobody reads.)
  bool log_info = spdlog::should_log(spdlog::level::info);
  for (size_t i = 0; i < count; ++i) {
    auto& p = entries[i];
    auto& r = reports[i];
    if (r.result == finish_result::stale)
      spdlog::warn("storage: outcome of job {} not recorded: the run is no "
                   "longer this worker's",
                   p.outcome.job_id);
    else if (log_info || p.outcome.kind != outcome_kind::completed)
      log_recorded(p.outcome, r);
    if (st.watcher)
      st.watcher->recorded(p.outcome, result_of(p.outcome, r));
    auto& entry = by_poller[p.poller.address()];
    entry.first = p.poller;
    entry.second.push_back({p.outcome.job_id, p.outcome.kind, r.result});
    if (r.has_event && r.event.type == event_type::rescued) {
      // A deadline overrun this node's executor ended: counted with the
      // maintenance's rescues (actor_worker_jobs_rescued_total).
      if (st.watcher) {
        rescued_job counted;
        counted.id = p.outcome.job_id;
        counted.kind = p.outcome.job_kind;
        counted.queue = p.outcome.queue;
        counted.reason = r.event.reason;
        counted.dead_lettered = destination_of(r).dead_lettered;
        counted.message = p.outcome.message;
        st.watcher->rescued(counted);
      }
      rescues.push_back(r.event);
    }
    for (const auto* e : {r.has_event ? &r.event : nullptr,
                          r.has_resolution ? &r.resolution : nullptr}) {
      if (e != nullptr && left_out(*e, event_type::exhausted))
        dead.push_back(*e);
      if (e != nullptr && left_out(*e, event_type::retried))
        retried.push_back(*e);
    }
  }
  follow_ups_after_commit(self, rescues, "rescue", "rescues");
  follow_ups_after_commit(self, dead, "exhausted", "dead letters");
  follow_ups_after_commit(self, retried, "retried", "retries");
  for (size_t i = 0; i < count; ++i) {
    if (reports[i].has_event)
      publish(self, std::move(reports[i].event));
    // A park that applied a resolution kept while its job ran: the
    // resolution's event comes after the park's.
    if (reports[i].has_resolution) {
      spdlog::info("job {} (kind '{}'): the callback resolution that came "
                   "while it ran was applied as it parked ({})",
                   entries[i].outcome.job_id,
                   printable(entries[i].outcome.job_kind),
                   to_string(reports[i].resolution.type));
      publish(self, std::move(reports[i].resolution));
    }
  }
  for (auto& [addr, entry] : by_poller)
    if (entry.first)
      self->send(entry.first, committed_atom::value, std::move(entry.second));
}

namespace {

/// Whether recording `o` may retry its job or move it to the dead letter
/// queue: a failure, or a park that applies a resolution (a failure or a
/// retry) that came while the job ran.
bool may_retry_or_dead_letter(const job_outcome& o) {
  switch (o.kind) {
    case outcome_kind::retryable_failure:
    case outcome_kind::terminal_failure:
    case outcome_kind::retry_after:
    case outcome_kind::waiting_callback:
      return true;
    default:
      return false;
  }
}

/// Outcome pending[i], which the database refuses on its own for a reason
/// that is not connectivity (typically a follow-up whose callable threw or
/// whose INSERT failed, which rolled the transition back), is recorded
/// again, if it may retry or dead-letter its job, with the follow-ups of a
/// retry or a dead-lettering left for after the commit: a failed job is
/// retried, or reaches the dead letter queue once its attempts are
/// exhausted, whatever its follow-ups do. What is still refused is
/// recorded as a retryable failure instead (its follow-ups after the
/// commit too), so the job runs again later. If even that is refused, the
/// job stays
/// running until its lease is reclaimed. Returns the error when the
/// database became unreachable meanwhile (then nothing was delivered and
/// the original outcome is to be retried).
caf::error record_instead(storage_pointer self, size_t i,
                          const caf::error& cause) {
  auto& st = self->state;
  auto& outcome = st.pending[i].outcome;
  constexpr auto after_commit = storage::failure_follow_ups::after_commit;
  if (may_retry_or_dead_letter(outcome)) {
    auto again = st.store->finish({outcome}, st.in_doubt, after_commit);
    if (again) {
      deliver(self, &st.pending[i], 1, *again, after_commit);
      return {};
    }
    if (unavailable(again.error()))
      return std::move(again.error());
  }
  auto why = render(cause);
  spdlog::error("storage: cannot record the {} outcome of job {}, recording "
                "a retryable failure instead: {}",
                to_string(outcome.kind), outcome.job_id, why);
  if (st.watcher)
    st.watcher->follow_ups_failed("outcome");
  job_outcome failure = outcome;
  failure.kind = outcome_kind::retryable_failure;
  failure.message = "recording the outcome ("
                    + std::string{to_string(outcome.kind)} + ") failed: " + why;
  failure.delay_ms = 0;
  auto reports = st.store->finish({failure}, false, after_commit);
  if (!reports) {
    if (unavailable(reports.error()))
      return std::move(reports.error());
    spdlog::error("storage: cannot record the outcome of job {}: {}; it "
                  "stays running until its lease is reclaimed",
                  outcome.job_id, render(reports.error()));
    reports = std::vector<storage::finish_report>(1);
  }
  // What was recorded is the failure: its log line, the poller's report
  // and the metrics say so.
  outcome = std::move(failure);
  deliver(self, &st.pending[i], 1, *reports, after_commit);
  return {};
}

/// A batch was refused for a reason other than connectivity: commit the
/// outcomes one by one, so one bad outcome cannot hold up the others
/// forever; one that is still refused alone is recorded as a retryable
/// failure instead. Stops at the first connectivity error and keeps only
/// the outcomes not recorded yet.
caf::error flush_one_by_one(storage_pointer self) {
  auto& st = self->state;
  for (size_t i = 0; i < st.pending.size(); ++i) {
    auto reports = st.store->finish({st.pending[i].outcome}, st.in_doubt,
                                    storage::failure_follow_ups::in_transaction);
    caf::error failure;
    if (reports)
      deliver(self, &st.pending[i], 1, *reports);
    else if (unavailable(reports.error()))
      failure = std::move(reports.error());
    else
      failure = record_instead(self, i, reports.error());
    if (failure) {
      st.pending.erase(st.pending.begin(),
                       st.pending.begin() + static_cast<long>(i));
      return failure;
    }
  }
  st.pending.clear();
  return {};
}

} // namespace

void flush(storage_pointer self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (!st.pending.empty()) {
    auto batch = pending_outcomes(st);
    auto reports = st.store->finish(batch, st.in_doubt,
                                    storage::failure_follow_ups::in_transaction);
    caf::error failure;
    if (reports) {
      deliver(self, st.pending.data(), batch.size(), *reports);
      st.pending.clear();
    } else if (unavailable(reports.error())) {
      failure = std::move(reports.error());
    } else if (batch.size() > 1) {
      spdlog::error("storage: recording a batch of {} outcomes failed, "
                    "recording them one by one: {}",
                    batch.size(), render(reports.error()));
      failure = flush_one_by_one(self);
    } else {
      failure = record_instead(self, 0, reports.error());
      if (!failure)
        st.pending.clear();
    }
    observe(st, "finish", failure);
    if (failure) {
      st.in_doubt = true;
      auto delay = st.flush_backoff.next();
      spdlog::error("storage: recording {} outcome(s) failed, retrying in {} "
                    "ms: {}",
                    st.pending.size(), delay.count(), render(failure));
      st.flush_scheduled = true;
      self->delayed_send(self, delay, flush_atom::value);
    } else {
      st.in_doubt = false;
      if (st.flush_backoff.failures() > 0)
        spdlog::info("storage: recording outcomes again after {} failed "
                     "attempt(s)",
                     st.flush_backoff.failures());
      st.flush_backoff.reset();
    }
  }
  *st.unrecorded = st.pending.size();
}

} // namespace aw::storage_steps
