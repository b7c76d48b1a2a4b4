#include "sim/model_database.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

namespace aw_sim {

const char* to_string(model_state s) {
  switch (s) {
    case model_state::scheduled:
      return "scheduled";
    case model_state::available:
      return "available";
    case model_state::running:
      return "running";
    case model_state::waiting_external:
      return "waiting_external";
    case model_state::completed:
      return "completed";
    case model_state::cancelled:
      return "cancelled";
    case model_state::dead:
      return "dead";
  }
  return "?";
}

model_database::model_database(model_settings settings,
                               std::function<int64_t()> now_ms)
  : settings_(settings), now_ms_(std::move(now_ms)) {
  // nop
}

// -- the driver's side --------------------------------------------------------

int64_t model_database::enqueue(const aw::enqueue_request& req,
                                int64_t parent) {
  auto now = this->now();
  model_job j;
  j.kind = req.kind;
  j.queue = req.options.queue;
  j.args = req.args.dump();
  j.priority = req.options.priority;
  j.run_at_ms = now + req.options.delay.count();
  j.state = req.options.delay.count() > 0 ? model_state::scheduled
                                          : model_state::available;
  j.max_attempts = req.options.max_attempts.value_or(0);
  if (req.options.deadline)
    j.deadline_ms = req.options.deadline->count();
  j.ordering_key = req.options.ordering_key;
  if (auto& u = req.options.unique) {
    // kind + args, optionally the queue and the period's bucket, as the
    // unique index's expression (storage/sql/unique_key.sql).
    auto key = j.kind + "|" + j.args;
    if (u->by_queue)
      key += "|" + j.queue;
    if (u->period.count() > 0)
      key += "|" + std::to_string(now / u->period.count());
    for (auto& [id, other] : jobs_)
      if (other.unique_key == key
          && std::find(other.unique_states.begin(), other.unique_states.end(),
                       to_string(other.state))
               != other.unique_states.end())
        return id; // a duplicate inserts nothing
    j.unique_key = key;
    j.unique_states = u->states;
  }
  j.id = ++next_id_;
  jobs_.emplace(j.id, j);
  model_change c;
  c.kind = parent == 0 ? model_change::what::enqueued
                       : model_change::what::follow_up;
  c.job = j.id;
  c.at_ms = now;
  c.transition = parent;
  c.state = j.state;
  report(c);
  return j.id;
}

void model_database::request_cancel(int64_t id) {
  if (auto i = jobs_.find(id); i != jobs_.end())
    i->second.cancel_requested = true;
}

// -- helpers ------------------------------------------------------------------

bool model_database::holds(const model_job& j, int64_t lease) const {
  if (j.state != model_state::running || j.lease != lease)
    return false;
  auto l = leases_.find(lease);
  return l != leases_.end() && !l->second.rescued;
}

bool model_database::is_due(const model_job& j, int64_t now) const {
  if (j.state == model_state::available)
    return true;
  if (j.state == model_state::scheduled)
    return j.run_at_ms <= now;
  if (AW_SIM_MUTATED(mutations, claim_no_recheck))
    return j.state == model_state::running; // no re-check of the state
  return false;
}

bool model_database::blocked_by_order(const model_job& j) const {
  if (!j.ordering_key)
    return false;
  for (auto& [id, other] : jobs_) {
    if (id >= j.id)
      break;
    if (other.ordering_key == j.ordering_key && !is_final(other.state))
      return true;
  }
  return false;
}

bool model_database::charge(model_job& j, const std::string& message,
                            std::optional<int64_t> delay_ms) {
  auto limit = j.max_attempts > 0 ? j.max_attempts : settings_.max_retries + 1;
  auto failures_before = j.error_count;
  j.error_count += 1;
  j.last_error = message;
  j.lease = 0;
  j.started = false;
  if (j.error_count >= limit) {
    j.state = model_state::dead;
    return true;
  }
  j.state = model_state::scheduled;
  // 2^n s after the n-th failure (DESIGN.md: 2 s, 4 s, 8 s ...).
  j.run_at_ms = now() + (delay_ms ? *delay_ms
                                  : (int64_t{1000} << std::min(failures_before + 1, 20)));
  return false;
}

std::string model_database::row_json(const model_job& j,
                                     int64_t transition) const {
  nlohmann::json row;
  row[j.state == model_state::dead ? "original_job_id" : "id"] = j.id;
  row["kind"] = j.kind;
  row["queue"] = j.queue;
  row["args"] = nlohmann::json::parse(j.args);
  row["state"] = to_string(j.state);
  row["priority"] = j.priority;
  row["attempt"] = j.attempt;
  row["error_count"] = j.error_count;
  row["run_at"] = std::to_string(j.run_at_ms);
  if (!j.last_error.empty())
    row["last_error_message"] = j.last_error;
  row["sim_transition"] = transition;
  return row.dump();
}

int64_t model_database::transition_of(const std::string& row_json) {
  if (row_json.empty())
    return 0;
  auto row = nlohmann::json::parse(row_json);
  return row.value("sim_transition", int64_t{0});
}

void model_database::insert_follow_ups(
  const aw::job_event& event, int64_t transition,
  const aw::storage::follow_up_function& follow_ups) {
  if (!follow_ups)
    return;
  // Throwing rolls the caller's transaction back.
  auto requests = follow_ups(event);
  int copies = AW_SIM_MUTATED(mutations, followup_twice) ? 2 : 1;
  for (int i = 0; i < copies; ++i)
    for (auto& r : requests)
      enqueue(r, transition);
}

// -- the backend's calls --------------------------------------------------------

aw::claim_result
model_database::claim(const std::string& worker,
                      const aw::storage::claim_request& req) {
  aw::claim_result out;
  if (req.limit <= 0)
    return out;
  auto now = this->now();
  std::vector<model_job*> due;
  for (auto& [id, j] : jobs_)
    if (j.queue == req.queue && is_due(j, now) && !blocked_by_order(j))
      due.push_back(&j);
  // Claim order: priority (lower first), run_at, id.
  std::sort(due.begin(), due.end(), [](const model_job* a, const model_job* b) {
    return std::tie(a->priority, a->run_at_ms, a->id)
           < std::tie(b->priority, b->run_at_ms, b->id);
  });
  if (due.empty())
    return out;
  model_lease lease;
  lease.id = ++next_lease_;
  lease.worker = worker;
  lease.claimed_at_ms = now;
  leases_.emplace(lease.id, lease);
  int64_t bytes = 0;
  for (auto* j : due) {
    if (static_cast<int>(out.jobs.size()) >= req.limit)
      break;
    auto size = static_cast<int64_t>(j->args.size());
    if (!out.jobs.empty() && bytes + size > req.max_bytes) {
      out.byte_bound = true;
      break;
    }
    bytes += size;
    // A second order of the same key must wait for this one.
    j->state = model_state::running;
    j->attempt += 1;
    j->lease = lease.id;
    j->started = false;
    auto transition = next_transition();
    aw::claimed_job c;
    c.id = j->id;
    c.lease = lease.id;
    c.kind = j->kind;
    c.queue = j->queue;
    c.args = j->args;
    c.priority = j->priority;
    c.attempt = j->attempt;
    c.error_count = j->error_count;
    c.max_attempts = j->max_attempts;
    c.metadata = "{}";
    c.deadline_ms = j->deadline_ms > 0 ? j->deadline_ms : req.default_deadline_ms;
    c.started_row = row_json(*j, transition);
    out.jobs.push_back(std::move(c));
    model_change ch;
    ch.kind = model_change::what::claimed;
    ch.job = j->id;
    ch.lease = lease.id;
    ch.worker = worker;
    ch.at_ms = now;
    ch.state = model_state::running;
    ch.transition = transition;
    report(ch);
  }
  return out;
}

std::vector<aw::storage::finish_report>
model_database::finish(const std::string& worker,
                       const std::vector<aw::job_outcome>& outcomes,
                       aw::storage::failure_follow_ups failures,
                       const aw::storage::follow_up_function& follow_ups) {
  std::vector<aw::storage::finish_report> reports(outcomes.size());
  auto now = this->now();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    auto& o = outcomes[i];
    auto& r = reports[i];
    auto found = jobs_.find(o.job_id);
    if (found == jobs_.end())
      continue;
    auto& j = found->second;
    bool guarded = AW_SIM_MUTATED(mutations, outcome_by_id)
                     ? j.state == model_state::running
                     : holds(j, o.lease)
                         && leases_.at(o.lease).worker == worker;
    if (!guarded)
      continue; // stale: the lease no longer holds the job
    model_change ch;
    ch.kind = model_change::what::transitioned;
    ch.job = j.id;
    ch.lease = j.lease;
    ch.presented_lease = o.lease;
    ch.worker = worker;
    ch.at_ms = now;
    ch.by = model_change::cause::outcome;
    ch.errors_before = j.error_count;
    ch.was_started = j.started;
    r.result = aw::finish_result::applied;
    r.has_event = true;
    r.event.kind = j.kind;
    r.event.duration_ms = o.duration_ms;
    r.event.attempt = o.attempt;
    switch (o.kind) {
      case aw::outcome_kind::completed:
        j.state = model_state::completed;
        j.lease = 0;
        r.event.type = aw::event_type::completed;
        break;
      case aw::outcome_kind::retryable_failure:
      case aw::outcome_kind::retry_after:
      case aw::outcome_kind::deadline_exceeded:
      case aw::outcome_kind::abandoned: {
        bool rescue = o.kind == aw::outcome_kind::deadline_exceeded
                      || o.kind == aw::outcome_kind::abandoned;
        std::optional<int64_t> delay;
        if (o.kind == aw::outcome_kind::retry_after)
          delay = o.delay_ms;
        bool dead = charge(j, o.message, delay);
        r.event.type = rescue ? aw::event_type::rescued
                              : dead ? aw::event_type::exhausted
                                     : aw::event_type::retried;
        r.event.message = o.message;
        if (rescue)
          r.event.reason = aw::rescue_reason::deadline_exceeded;
        break;
      }
      case aw::outcome_kind::terminal_failure:
        j.error_count += 1;
        j.last_error = o.message;
        j.state = model_state::dead;
        j.lease = 0;
        r.event.type = aw::event_type::exhausted;
        r.event.message = o.message;
        break;
      case aw::outcome_kind::snoozed:
        j.state = model_state::scheduled;
        j.run_at_ms = now + o.delay_ms;
        j.lease = 0;
        r.has_event = false; // snoozes fire nothing
        break;
      case aw::outcome_kind::cancelled:
        j.state = model_state::cancelled;
        j.last_error = o.message;
        j.lease = 0;
        r.event.type = aw::event_type::cancelled;
        r.event.message = o.message;
        break;
      case aw::outcome_kind::waiting_callback:
        j.state = model_state::waiting_external;
        j.callback_timeout_ms = now + o.delay_ms;
        j.lease = 0;
        r.event.type = aw::event_type::waiting_for_callback;
        break;
    }
    j.started = false;
    auto transition = next_transition();
    if (r.has_event)
      r.event.job_json = row_json(j, transition);
    ch.state = j.state;
    ch.errors_after = j.error_count;
    ch.transition = transition;
    ch.has_event = r.has_event;
    ch.event = r.event.type;
    // In the outcome's transaction, unless it is a rescue's, or a
    // failure's that the caller inserts after the commit.
    if (r.has_event) {
      auto t = r.event.type;
      bool after = t == aw::event_type::rescued
                   || ((t == aw::event_type::retried
                        || t == aw::event_type::exhausted)
                       && failures == aw::storage::failure_follow_ups::after_commit);
      ch.follow_ups_in_transaction = !after;
    }
    report(ch);
    if (ch.follow_ups_in_transaction)
      insert_follow_ups(r.event, transition, follow_ups);
  }
  return reports;
}

std::vector<int64_t>
model_database::heartbeat(const std::string& worker,
                          const std::vector<int64_t>& leases) {
  std::set<int64_t> distinct(leases.begin(), leases.end());
  std::vector<int64_t> out;
  auto call = ++heartbeats_;
  for (auto id : distinct)
    if (auto l = leases_.find(id);
        l != leases_.end() && l->second.worker == worker && !l->second.rescued) {
      out.push_back(id);
      model_change ch;
      ch.kind = model_change::what::lease_heartbeated;
      ch.lease = id;
      ch.transition = call;
      ch.worker = worker;
      ch.at_ms = now();
      report(ch);
    }
  take_back_orphans(worker, leases, call);
  return out;
}

void model_database::take_back_orphans(const std::string& worker,
                                       const std::vector<int64_t>& held,
                                       int64_t call) {
  auto now = this->now();
  std::set<int64_t> open;
  for (auto& [id, j] : jobs_)
    if (j.state == model_state::running && j.lease != 0)
      open.insert(j.lease);
  for (auto id : open) {
    auto& l = leases_.at(id);
    if (l.worker != worker || l.rescued
        || std::find(held.begin(), held.end(), id) != held.end()
        || l.claimed_at_ms >= now - settings_.reclaim_window_ms)
      continue;
    l.rescued = true;
    model_change ch;
    ch.kind = model_change::what::taken_back;
    ch.lease = id;
    ch.transition = call;
    ch.worker = worker;
    ch.at_ms = now;
    report(ch);
  }
}

std::vector<int64_t>
model_database::cancel_requests(const std::vector<int64_t>& ids) const {
  std::vector<int64_t> out;
  for (auto id : ids)
    if (auto j = jobs_.find(id); j != jobs_.end() && j->second.cancel_requested)
      out.push_back(id);
  return out;
}

std::vector<aw::rescued_job> model_database::rescue(int limit) {
  auto now = this->now();
  auto window = settings_.reclaim_window_ms;
  // 1. Take back the leases of gone workers (stopped, or silent for the
  // window; or never seen at all) claimed more than the window ago: a
  // claim is as good as a heartbeat for the window after it. A worker
  // with no row at all is gone only once its newest claim is that old: one
  // claim inside the window keeps all its leases, as actor_worker_rescue
  // has it (its claims, whatever became of them, are the only sign of life
  // such a worker gave). The model rescued it lease by lease before, more
  // than the SQL does: the SQL schedules' seed 83 disagreed.
  std::set<std::string> rowless_claimed_lately;
  for (auto& [id, lease] : leases_)
    if (nodes_.find(lease.worker) == nodes_.end()
        && lease.claimed_at_ms >= now - window)
      rowless_claimed_lately.insert(lease.worker);
  for (auto& [id, lease] : leases_) {
    if (lease.rescued)
      continue;
    bool gone;
    if (AW_SIM_MUTATED(mutations, rescue_unguarded)) {
      gone = true; // no guard: every lease is taken back
    } else {
      auto n = nodes_.find(lease.worker);
      bool silent = n == nodes_.end() || n->second.left
                    || n->second.last_seen_ms < now - window;
      gone = silent && lease.claimed_at_ms < now - window
             && rowless_claimed_lately.count(lease.worker) == 0;
    }
    if (gone)
      lease.rescued = true;
  }
  for (auto& [worker, n] : nodes_)
    if (n.left || n.last_seen_ms < now - window)
      n.rescued = true;
  // 2. Running jobs whose lease was taken back, and expired callbacks.
  std::vector<aw::rescued_job> out;
  int seen = 0;
  for (auto& [id, j] : jobs_) {
    if (seen >= limit)
      break;
    bool orphan = j.state == model_state::running
                  && (j.lease == 0 || leases_.at(j.lease).rescued);
    bool expired = j.state == model_state::waiting_external
                   && j.callback_timeout_ms < now;
    if (!orphan && !expired)
      continue;
    ++seen;
    model_change ch;
    ch.kind = model_change::what::transitioned;
    ch.job = j.id;
    ch.lease = j.lease;
    ch.at_ms = now;
    ch.by = model_change::cause::rescue;
    ch.errors_before = j.error_count;
    ch.was_started = j.started;
    if (j.lease != 0)
      ch.worker = leases_.at(j.lease).worker;
    if (orphan && !j.started) {
      // Claimed but never started: back uncharged, its attempt given back.
      j.state = model_state::available;
      j.attempt = std::max(j.attempt - 1, 0);
      j.lease = 0;
      ch.state = j.state;
      ch.errors_after = j.error_count;
      ch.transition = next_transition();
      report(ch);
      continue;
    }
    aw::rescued_job r;
    r.id = j.id;
    r.kind = j.kind;
    r.queue = j.queue;
    r.reason = expired ? aw::rescue_reason::expired_callback
                       : aw::rescue_reason::stale_heartbeat;
    r.message = expired ? "callback expired" : "lease expired: worker "
                                                 + ch.worker
                                                 + " stopped heartbeating";
    r.dead_lettered = charge(j, r.message, std::nullopt);
    auto transition = next_transition();
    r.job_json = row_json(j, transition);
    ch.state = j.state;
    ch.errors_after = j.error_count;
    ch.transition = transition;
    ch.has_event = true;
    ch.event = aw::event_type::rescued;
    report(ch);
    out.push_back(std::move(r));
  }
  return out;
}

void model_database::enqueue_follow_ups(
  const std::vector<aw::job_event>& events,
  const aw::storage::follow_up_function& follow_ups) {
  for (auto& e : events)
    insert_follow_ups(e, transition_of(e.job_json), follow_ups);
}

int64_t model_database::release(const std::string& worker,
                                const std::vector<aw::held_job>& held,
                                bool started) {
  auto now = this->now();
  int64_t count = 0;
  for (auto& h : held) {
    auto found = jobs_.find(h.id);
    if (found == jobs_.end())
      continue;
    auto& j = found->second;
    if (!holds(j, h.lease) || leases_.at(h.lease).worker != worker)
      continue;
    model_change ch;
    ch.kind = model_change::what::transitioned;
    ch.job = j.id;
    ch.lease = j.lease;
    ch.presented_lease = h.lease;
    ch.worker = worker;
    ch.at_ms = now;
    ch.by = model_change::cause::release;
    ch.release_started = started;
    ch.errors_before = j.error_count;
    ch.was_started = j.started;
    j.state = model_state::available;
    j.lease = 0;
    j.started = false;
    if (!started)
      j.attempt = std::max(j.attempt - 1, 0);
    ch.state = j.state;
    ch.errors_after = j.error_count;
    ch.transition = next_transition();
    report(ch);
    ++count;
  }
  return count;
}

void model_database::record_starts(const std::vector<aw::held_job>& held) {
  for (auto& h : held) {
    auto found = jobs_.find(h.id);
    if (found == jobs_.end() || found->second.lease != h.lease)
      continue;
    found->second.started = true;
    model_change ch;
    ch.kind = model_change::what::started;
    ch.job = h.id;
    ch.lease = h.lease;
    ch.at_ms = now();
    report(ch);
  }
}

bool model_database::refresh_node(const std::string& worker, int64_t held,
                                  bool candidate) {
  auto now = this->now();
  auto& n = nodes_[worker];
  n.last_seen_ms = now;
  n.rescued = false;
  model_change ch;
  ch.kind = model_change::what::node_seen;
  ch.worker = worker;
  ch.at_ms = now;
  report(ch);
  // A worker holding nothing sends no heartbeat: its claims in doubt are
  // taken back here.
  if (held == 0)
    take_back_orphans(worker, {}, ++heartbeats_);
  if (candidate
      && (leader_.empty() || leader_ == worker || leader_expires_ms < now)) {
    leader_ = worker;
    leader_expires_ms = now + settings_.reclaim_window_ms;
  }
  return candidate && leader_ == worker;
}

bool model_database::resign(const std::string& worker) {
  if (leader_ != worker)
    return false;
  leader_.clear();
  return true;
}

void model_database::leave(const std::string& worker) {
  // As node_leave.sql: the row goes when the worker holds nothing any
  // more; else it is marked left, and the next rescue takes back what its
  // claims still hold (a later refresh does not undo that).
  bool idle = true;
  for (auto& [id, j] : jobs_)
    if (j.state == model_state::running && j.lease != 0
        && leases_.at(j.lease).worker == worker && !leases_.at(j.lease).rescued)
      idle = false;
  auto n = nodes_.find(worker);
  if (n == nodes_.end())
    return;
  if (idle)
    nodes_.erase(n);
  else
    n->second.left = true;
  model_change ch;
  ch.kind = model_change::what::node_left;
  ch.worker = worker;
  ch.at_ms = now();
  ch.row_deleted = idle;
  report(ch);
}

} // namespace aw_sim
