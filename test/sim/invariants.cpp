#include "sim/invariants.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sim/follow_up_plan.hpp"

namespace aw_sim {

namespace {

std::string job_text(int64_t job) {
  return "job " + std::to_string(job);
}

} // namespace

invariants::invariants(const model_database& db, int64_t crash_bound_ms)
  : db_(db), crash_bound_ms_(crash_bound_ms) {
  // nop
}

void invariants::fail(const char* which, std::string detail) {
  if (!first_)
    first_ = violation{which, std::move(detail)};
}

void invariants::on_change(const model_change& c) {
  using what = model_change::what;
  switch (c.kind) {
    case what::enqueued:
      break;
    case what::follow_up: {
      auto& t = transitions_[c.transition];
      ++t.inserted;
      if (t.inserted > t.expected)
        fail(invariant::one_follow_up_set,
             "transition " + std::to_string(c.transition) + " of "
               + job_text(t.job) + " inserted " + std::to_string(t.inserted)
               + " follow-ups, expected " + std::to_string(t.expected));
      break;
    }
    case what::claimed: {
      auto& held = lease_of_[c.job];
      if (held != 0)
        fail(invariant::one_live_execution,
             job_text(c.job) + " claimed by " + c.worker + " (lease "
               + std::to_string(c.lease) + ") while lease "
               + std::to_string(held) + " of "
               + leases_[held].first + " still holds it");
      held = c.lease;
      leases_[c.lease] = {c.worker, c.at_ms};
      auto& t = transitions_[c.transition];
      t.job = c.job;
      t.claim = true;
      break;
    }
    case what::started:
      break;
    case what::node_seen:
      seen_[c.worker] = c.at_ms;
      break;
    case what::node_left:
      // A worker that left holds nothing: either its row is gone (until a
      // refresh brings it back) or it is marked left for good.
      if (c.row_deleted)
        seen_.erase(c.worker);
      else
        left_.insert(c.worker);
      break;
    case what::lease_heartbeated:
      listed_[c.lease] = c.transition;
      break;
    case what::taken_back: {
      // Only a claim older than the window that its worker no longer holds:
      // the heartbeat call taking it back did not list it.
      auto window = db_.settings().reclaim_window_ms;
      auto listed = listed_.find(c.lease);
      auto claimed_at = leases_[c.lease].second;
      bool held = listed != listed_.end() && listed->second == c.transition;
      if (claimed_at >= c.at_ms - window || held)
        fail(invariant::guarded_rescue,
             "lease " + std::to_string(c.lease) + " of " + c.worker
               + " taken back at " + std::to_string(c.at_ms)
               + ", claimed at " + std::to_string(claimed_at)
               + (held ? ", by the heartbeat that lists it" : ""));
      orphaned_.insert(c.lease);
      break;
    }
    case what::transitioned: {
      auto& held = lease_of_[c.job];
      if (c.by == model_change::cause::outcome && c.presented_lease != held)
        fail(invariant::no_stale_outcome,
             "an outcome of " + job_text(c.job) + " under lease "
               + std::to_string(c.presented_lease) + " moved it to "
               + to_string(c.state) + " while lease " + std::to_string(held)
               + " holds it");
      if (c.by == model_change::cause::rescue && c.lease != 0) {
        auto& [worker, claimed_at] = leases_[c.lease];
        auto window = db_.settings().reclaim_window_ms;
        auto seen = seen_.find(worker);
        // A lease lives by its claim and by its worker's heartbeat (the
        // refresh of its worker_nodes row) while the worker holds it: an
        // orphan taken back is no longer held, a worker that left holds
        // nothing.
        bool fresh_node = orphaned_.count(c.lease) == 0
                          && left_.count(worker) == 0 && seen != seen_.end()
                          && seen->second >= c.at_ms - window;
        bool fresh_claim = claimed_at >= c.at_ms - window;
        if (fresh_node || fresh_claim)
          fail(invariant::guarded_rescue,
               "rescue of " + job_text(c.job) + " (lease "
                 + std::to_string(c.lease) + " of " + worker + ", claimed at "
                 + std::to_string(claimed_at) + ") at "
                 + std::to_string(c.at_ms) + ": the worker was seen at "
                 + (seen == seen_.end() ? std::string{"never"}
                                        : std::to_string(seen->second))
                 + ", window " + std::to_string(window) + " ms");
      }
      if (c.by == model_change::cause::release) {
        if (c.errors_after != c.errors_before)
          fail(invariant::uncharged_release,
               "releasing " + job_text(c.job) + " charged it");
        if (c.was_started && !c.release_started)
          fail(invariant::uncharged_release,
               "releasing " + job_text(c.job)
                 + " gave its attempt back although its handler started");
      }
      held = 0;
      auto& t = transitions_[c.transition];
      t.job = c.job;
      t.has_event = c.has_event;
      t.event = c.event;
      t.in_transaction = c.follow_ups_in_transaction;
      if (c.has_event) {
        auto j = db_.jobs().find(c.job);
        t.expected = j == db_.jobs().end()
                       ? 0
                       : expected_follow_ups(c.event, j->second.kind);
      }
      if (t.in_transaction)
        to_count_.push_back(c.transition);
      break;
    }
  }
}

void invariants::on_hook(const aw::job_event& e) {
  int64_t transition = 0;
  int64_t job = 0;
  if (!e.job_json.empty()) {
    auto row = nlohmann::json::parse(e.job_json);
    transition = row.value("sim_transition", int64_t{0});
    job = row.value(row.contains("original_job_id") ? "original_job_id" : "id",
                    int64_t{0});
  }
  auto t = transitions_.find(transition);
  if (t == transitions_.end()) {
    fail(invariant::hooks_match_commits,
         std::string{"a "} + aw::to_string(e.type) + " event of " + job_text(job)
           + " matches no committed transition");
    return;
  }
  auto& book = t->second;
  bool matches = book.job == job
                 && (e.type == aw::event_type::started
                       ? book.claim
                       : book.has_event && book.event == e.type);
  if (!matches)
    fail(invariant::hooks_match_commits,
         std::string{"a "} + aw::to_string(e.type) + " event of " + job_text(job)
           + " for transition " + std::to_string(transition)
           + ", which committed " + (book.claim ? "a claim" : aw::to_string(book.event))
           + " of " + job_text(book.job));
  if (++book.hooked > 1)
    fail(invariant::hooks_match_commits,
         "transition " + std::to_string(transition) + " of " + job_text(job)
           + " fired " + std::to_string(book.hooked) + " hook events");
}

void invariants::on_crash(const std::string& worker, int64_t now_ms) {
  auto from = std::max(now_ms, held_until_);
  for (auto& [job, lease] : lease_of_)
    if (lease != 0 && leases_[lease].first == worker)
      crashes_.push_back({worker, job, lease, from + crash_bound_ms_});
}

void invariants::hold_crash_deadlines(int64_t until_ms) {
  held_until_ = std::max(held_until_, until_ms);
  for (auto& c : crashes_)
    c.deadline_ms = std::max(c.deadline_ms, until_ms + crash_bound_ms_);
}

void invariants::check_step(int64_t now_ms) {
  for (auto id : to_count_) {
    auto& t = transitions_[id];
    if (t.inserted != t.expected)
      fail(invariant::one_follow_up_set,
           "transition " + std::to_string(id) + " of " + job_text(t.job)
             + " committed with " + std::to_string(t.inserted)
             + " follow-ups, expected " + std::to_string(t.expected));
  }
  to_count_.clear();
  auto gone = std::remove_if(crashes_.begin(), crashes_.end(),
                             [&](const crash_book& c) {
                               return lease_of_[c.job] != c.lease;
                             });
  crashes_.erase(gone, crashes_.end());
  for (auto& c : crashes_)
    if (now_ms > c.deadline_ms) {
      fail(invariant::crash_recovery,
           job_text(c.job) + " of crashed " + c.worker + " still held by lease "
             + std::to_string(c.lease) + " at " + std::to_string(now_ms)
             + " (deadline " + std::to_string(c.deadline_ms) + ")");
      break;
    }
}

void invariants::check_end() {
  for (auto& [id, j] : db_.jobs())
    if (!is_final(j.state)) {
      fail(invariant::no_job_lost,
           job_text(id) + " (" + j.kind + ") ended the run "
             + to_string(j.state) + " after the faults healed, attempt "
             + std::to_string(j.attempt) + ", errors "
             + std::to_string(j.error_count));
      return;
    }
}

} // namespace aw_sim
