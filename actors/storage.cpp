#include "actor_worker/actors/storage.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actor_worker/actors/job_log.hpp"
#include "actor_worker/config/config.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"

namespace aw {

namespace {

/// The connection broke or was refused (for now, or until someone fixes
/// the URL or the password): the statement may or may not have committed,
/// and retrying later is the remedy. Outcomes are never given up for it.
bool unavailable(const caf::error& err) {
  if (err.category() != error_category_atom)
    return false;
  auto code = static_cast<ec>(err.code());
  return code == ec::database_unavailable
         || code == ec::database_misconfigured;
}

/// Tells the observer (if any) how a statement of `operation` went.
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

std::vector<job_outcome> pending_outcomes(const storage_state& st) {
  std::vector<job_outcome> out;
  out.reserve(st.pending.size());
  for (auto& p : st.pending)
    out.push_back(p.outcome);
  return out;
}

/// Hands a committed transition to the hook dispatcher: only transitions of
/// observed kinds carry their row, and only those have anyone to hear them.
void publish(storage_pointer self, job_event&& e) {
  auto& d = self->state.dispatcher;
  if (d && !e.job_json.empty())
    self->send(d, std::move(e));
}

/// Follow-ups inserted after their transitions committed, best effort: a
/// rescue's always, a dead-lettering's when they failed in its transaction.
/// A failing follow-up must never leave a job stuck: its error (which names
/// the follow-up's kind, event and job) is logged and counted under
/// `stage`, and the transitions (`standing`) stand.
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

/// What became of the outcomes entries[0 .. count) (pending ones, or ones
/// a transactional handler committed): reports to their pollers (one
/// message per poller), events to the hooks.
void deliver(storage_pointer self, const pending_outcome* entries,
             size_t count, std::vector<storage::finish_report>& reports,
             storage::failure_follow_ups failures
             = storage::failure_follow_ups::in_transaction) {
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

/// Commits the pending outcomes. Whatever the database refuses is split
/// off; what cannot be written now (connectivity) stays pending and is
/// retried with backoff, marked in doubt.
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

} // namespace

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
    },
    [self](heartbeat_atom, const std::vector<int64_t>& leases)
      -> caf::result<std::vector<int64_t>> {
      auto alive = self->state.store->heartbeat(leases);
      observe(self->state, "heartbeat", alive ? caf::error{} : alive.error());
      if (!alive) {
        spdlog::error("storage: {}", render(alive.error()));
        return std::move(alive.error());
      }
      return std::move(*alive);
    },
    [self](cancel_atom, const std::vector<int64_t>& jobs)
      -> caf::result<std::vector<int64_t>> {
      return logged(self->state, "cancel_requests",
                    self->state.store->cancel_requests(jobs));
    },
    [self](rescue_atom) -> caf::result<std::vector<rescued_job>> {
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
    },
    [self](finish_atom, std::vector<job_outcome>& outcomes,
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
    },
    [self](release_atom, const std::vector<held_job>& jobs,
           bool started) -> caf::result<int64_t> {
      // Outcomes that arrived before the release commit first, so a job
      // that finished within the drain keeps its outcome.
      flush(self);
      if (jobs.empty())
        return int64_t{0};
      return logged(self->state, "release",
                    self->state.store->release(jobs, started));
    },
    [self](started_atom, const std::vector<held_job>& jobs) {
      auto& st = self->state;
      auto failure = st.store->record_starts(jobs);
      observe(st, "record_starts", failure);
      if (failure)
        // Best effort: those jobs go back uncharged should this worker
        // die, and their next claim records their start.
        spdlog::warn("storage: recording that {} job(s) started failed: {}",
                     jobs.size(), render(failure));
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
    [self](sample_atom) -> caf::result<int64_t> {
      auto& st = self->state;
      auto samples = st.store->sample_queues();
      if (samples && st.watcher)
        st.watcher->sampled(*samples);
      caf::expected<int64_t> count{samples ? static_cast<int64_t>(samples->size())
                                           : int64_t{0}};
      if (!samples)
        count = std::move(samples.error());
      return logged(st, "sample_queues", std::move(count));
    },
    [self](node_atom, int64_t held, bool candidate) -> caf::result<bool> {
      return logged(self->state, "refresh_node",
                    self->state.store->refresh_node(held, candidate));
    },
    [self](resign_atom) -> caf::result<bool> {
      return logged(self->state, "resign", self->state.store->resign());
    },
    [self](controls_atom) -> caf::result<std::vector<std::string>> {
      auto& st = self->state;
      auto changes = st.store->apply_queue_controls();
      if (changes)
        for (auto& c : *changes)
          spdlog::warn("queue_controls: this node's configuration changed "
                       "{} (the last node started wins)",
                       c);
      return logged(st, "apply_queue_controls", std::move(changes));
    },
    [self](leave_atom) -> caf::result<bool> {
      auto err = self->state.store->leave();
      observe(self->state, "leave", err);
      if (err) {
        spdlog::warn("storage: {} (the row goes with the next cleanup)",
                     render(err));
        return err;
      }
      return true;
    },
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
