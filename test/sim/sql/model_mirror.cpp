#include "model_mirror.hpp"

#include <chrono>

#include "sim/model_database.hpp"

namespace aw::sim::sql {

namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// Dates what the model does while it lives at `ms` (model_mirror::at_ms_).
struct at_step {
  std::optional<int64_t>& at;
  at_step(std::optional<int64_t>& a, int64_t ms) : at(a) {
    at = ms;
  }
  ~at_step() {
    at.reset();
  }
};

std::string queue_of(int64_t model_id) {
  return "j" + std::to_string(model_id);
}

} // namespace

model_mirror::model_mirror(int max_retries, int64_t window_ms) {
  aw_sim::model_settings s;
  s.max_retries = max_retries;
  s.reclaim_window_ms = window_ms;
  // The model's clock: the wall clock, or the time a step is dated at
  // (claimed, finished), plus the jumps. The model stamps times when it
  // follows a step, after its commit; the SQL stamped them in the step
  // (now(), its transaction's start). On a loaded machine they were
  // 170 ms apart, and a claim of a retried job 2 s after its retry (its
  // first backoff) found it due in the SQL and not yet in the model
  // (seed 74 under load).
  db_ = std::make_unique<aw_sim::model_database>(
    s, [this] { return (at_ms_ ? *at_ms_ : wall_ms()) + offset_ms_; });
}

model_mirror::~model_mirror() = default;

void model_mirror::diverge(const std::string& why) {
  if (why_.empty())
    why_ = why;
}

void model_mirror::jump(int64_t ms) {
  offset_ms_ += ms;
}

void model_mirror::enqueued(int64_t id, const std::string& kind, int priority,
                            int64_t delay_ms) {
  if (diverged())
    return;
  enqueue_request r;
  r.kind = kind;
  r.options.priority = priority;
  r.options.delay = std::chrono::milliseconds{delay_ms};
  // Its own queue, named after the model's id: the next one it assigns.
  int64_t next = db_->jobs().empty() ? 1 : db_->jobs().rbegin()->first + 1;
  r.options.queue = queue_of(next);
  auto model_id = db_->enqueue(r);
  if (model_id != next)
    diverge("the model numbered a job unexpectedly");
  ids_[id] = model_id;
}

int64_t model_mirror::model_lease(int64_t id, int64_t lease) const {
  auto it = leases_.find({id, lease});
  return it == leases_.end() ? -1 : it->second;
}

std::optional<std::string>
model_mirror::claimed(const std::string& worker,
                      const std::vector<claimed_job>& jobs, int64_t at_ms) {
  if (diverged())
    return std::nullopt;
  at_step pin{at_ms_, at_ms};
  for (auto& j : jobs) {
    auto id = ids_.find(j.id);
    if (id == ids_.end())
      continue; // a follow-up: not mirrored
    storage::claim_request req;
    req.queue = queue_of(id->second);
    req.limit = 1;
    auto got = db_->claim(worker, req);
    if (got.jobs.empty())
      return "the real claim handed out job " + std::to_string(j.id)
             + " (lease " + std::to_string(j.lease)
             + "), which the model would not: it is "
             + aw_sim::to_string(db_->jobs().at(id->second).state);
    leases_[{j.id, j.lease}] = got.jobs[0].lease;
    if (start_unknown_.erase(id->second) > 0)
      db_->record_starts({held_job{id->second, got.jobs[0].lease, 0}});
    if (got.jobs[0].attempt != j.attempt)
      return "job " + std::to_string(j.id) + " claimed as attempt "
             + std::to_string(j.attempt) + ", the model's attempt "
             + std::to_string(got.jobs[0].attempt);
  }
  return std::nullopt;
}

std::optional<std::string>
model_mirror::finished(const std::string& worker,
                       const std::vector<job_outcome>& outs,
                       const std::vector<storage::finish_report>& reports,
                       int64_t at_ms) {
  if (diverged())
    return std::nullopt;
  at_step pin{at_ms_, at_ms};
  std::vector<job_outcome> mine;
  std::vector<size_t> which;
  for (size_t i = 0; i < outs.size(); ++i) {
    auto id = ids_.find(outs[i].job_id);
    if (id == ids_.end())
      continue;
    auto o = outs[i];
    o.job_id = id->second;
    o.lease = model_lease(outs[i].job_id, outs[i].lease);
    o.observed = false;
    mine.push_back(o);
    which.push_back(i);
  }
  auto none = [](const job_event&) { return std::vector<enqueue_request>{}; };
  auto got = db_->finish(worker, mine, storage::failure_follow_ups::in_transaction,
                         none);
  for (size_t k = 0; k < mine.size(); ++k) {
    auto i = which[k];
    bool real = reports[i].result == finish_result::applied;
    bool model = got[k].result == finish_result::applied;
    if (real != model)
      return "the outcome of job " + std::to_string(outs[i].job_id)
             + " (lease " + std::to_string(outs[i].lease) + ") was "
             + (real ? "applied" : "refused") + ", the model "
             + (model ? "applies" : "refuses") + " it";
  }
  return std::nullopt;
}

std::optional<std::string>
model_mirror::heartbeat(const std::string& worker, int64_t held_count,
                        const std::vector<std::pair<int64_t, int64_t>>& held,
                        const std::vector<int64_t>& kept) {
  if (diverged())
    return std::nullopt;
  db_->refresh_node(worker, held_count, false);
  std::vector<int64_t> leases;
  for (auto& [id, lease] : held)
    leases.push_back(model_lease(id, lease));
  auto still = db_->heartbeat(worker, leases);
  std::set<int64_t> real_kept(kept.begin(), kept.end());
  std::set<int64_t> model_kept(still.begin(), still.end());
  for (auto& [id, lease] : held) {
    if (!ids_.count(id))
      continue;
    bool real = real_kept.count(lease) > 0;
    bool model = model_kept.count(model_lease(id, lease)) > 0;
    if (real != model)
      return "a heartbeat found the lease " + std::to_string(lease)
             + " of job " + std::to_string(id) + " "
             + (real ? "still held" : "gone") + ", the model "
             + (model ? "still held" : "gone");
  }
  return std::nullopt;
}

void model_mirror::released(const std::string& worker,
                            const std::vector<std::pair<int64_t, int64_t>>& jobs,
                            bool started) {
  if (diverged())
    return;
  std::vector<held_job> mine;
  for (auto& [id, lease] : jobs)
    if (auto m = ids_.find(id); m != ids_.end())
      mine.push_back({m->second, model_lease(id, lease), 0});
  db_->release(worker, mine, started);
}

void model_mirror::started(const std::vector<std::pair<int64_t, int64_t>>& jobs) {
  if (diverged())
    return;
  std::vector<held_job> mine;
  for (auto& [id, lease] : jobs)
    if (auto m = ids_.find(id); m != ids_.end())
      mine.push_back({m->second, model_lease(id, lease), 0});
  db_->record_starts(mine);
}

void model_mirror::rescued() {
  if (diverged())
    return;
  std::map<int64_t, aw_sim::model_job> before = db_->jobs();
  db_->rescue(50);
  // Given back uncharged: the next claim records the start first.
  for (auto& [id, j] : db_->jobs()) {
    auto b = before.find(id);
    if (b != before.end() && b->second.state == aw_sim::model_state::running
        && j.state == aw_sim::model_state::available)
      start_unknown_.insert(id);
  }
}

std::vector<std::string>
model_mirror::ended(const std::map<int64_t, std::pair<std::string, int>>& real) {
  std::vector<std::string> out;
  if (diverged())
    return out;
  for (auto& [id, model_id] : ids_) {
    auto& j = db_->jobs().at(model_id);
    std::string state = j.state == aw_sim::model_state::dead
                           ? "dead_letter"
                           : aw_sim::to_string(j.state);
    auto r = real.find(id);
    if (r == real.end()) {
      out.push_back("job " + std::to_string(id) + " is gone from the "
                    "database; the model has it " + state);
      continue;
    }
    if (r->second.first != state || r->second.second != j.error_count)
      out.push_back("job " + std::to_string(id) + " ended "
                    + r->second.first + " with " + std::to_string(r->second.second)
                    + " failed attempts; the model: " + state + " with "
                    + std::to_string(j.error_count));
  }
  return out;
}

} // namespace aw::sim::sql
