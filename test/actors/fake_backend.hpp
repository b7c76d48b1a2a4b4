#pragma once
// A scripted storage backend for the deterministic storage-actor tests: it
// records every call with the virtual time it arrived at, and fails the
// calls the test names, as PostgreSQL would (a broken connection, or a
// statement the database refuses).

#include <functional>
#include <set>
#include <vector>

#include <caf/actor_clock.hpp>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/storage/backend.hpp"

namespace aw_test {

class fake_backend : public aw::storage::backend {
public:
  using time_point = caf::actor_clock::time_point;

  /// One finish() or finish_and_claim() call.
  struct write_call {
    std::vector<int64_t> jobs;
    std::vector<aw::outcome_kind> kinds;
    bool in_doubt = false;
    bool fused = false;
    time_point at;
  };

  // -- the script ------------------------------------------------------------

  /// Write calls (numbered from 0, in arrival order) that fail with
  /// database_unavailable, as a connection that broke mid-commit.
  std::set<size_t> unavailable_writes;
  /// Jobs whose outcome the database refuses (database_error, failing the
  /// whole call), unless recorded as a retryable failure: a follow-up that
  /// cannot be inserted rolls back its transition, never a plain failure.
  std::set<int64_t> refused;
  /// Jobs whose every outcome is refused, even a retryable failure.
  std::set<int64_t> refused_always;
  /// Claims fail with database_unavailable while true.
  bool claims_unavailable = false;
  /// Ids of the jobs each claim returns (one per call, then empty claims).
  std::vector<std::vector<int64_t>> claims;
  /// Jobs an operator asked to cancel (what cancel_requests() finds).
  std::set<int64_t> cancel_requested;
  /// The virtual clock (set by the fixture).
  std::function<time_point()> now;

  // -- what happened ---------------------------------------------------------

  std::vector<write_call> writes;
  int claim_calls = 0;
  /// How many write calls had come before each claim() call.
  std::vector<size_t> writes_at_claim;
  /// Jobs record_starts() was told about, in order.
  std::vector<int64_t> recorded_starts;

  // -- the backend -----------------------------------------------------------

  caf::expected<aw::claim_result>
  claim(const aw::storage::claim_request&) override {
    ++claim_calls;
    writes_at_claim.push_back(writes.size());
    if (claims_unavailable)
      return aw::make_error(aw::ec::database_unavailable,
                            "claiming jobs: fake: connection refused");
    return next_claim();
  }

  caf::expected<std::pair<std::vector<aw::storage::finish_report>,
                          aw::claim_result>>
  finish_and_claim(const std::vector<aw::job_outcome>& outcomes,
                   const aw::storage::claim_request&, bool in_doubt) override {
    auto reports = write(outcomes, in_doubt, true);
    if (!reports)
      return std::move(reports.error());
    ++claim_calls;
    return std::make_pair(std::move(*reports), next_claim());
  }

  caf::expected<std::vector<aw::storage::finish_report>>
  finish(const std::vector<aw::job_outcome>& outcomes, bool in_doubt,
         aw::storage::failure_follow_ups) override {
    return write(outcomes, in_doubt, false);
  }

  caf::expected<std::vector<int64_t>>
  heartbeat(const std::vector<int64_t>& leases) override {
    return leases;
  }

  caf::expected<std::vector<int64_t>>
  cancel_requests(const std::vector<int64_t>& jobs) override {
    std::vector<int64_t> out;
    for (auto id : jobs)
      if (cancel_requested.count(id) > 0)
        out.push_back(id);
    return out;
  }

  caf::expected<std::vector<aw::rescued_job>> rescue(int) override {
    return std::vector<aw::rescued_job>{};
  }

  caf::error enqueue_follow_ups(const std::vector<aw::job_event>&) override {
    return {};
  }

  caf::expected<int64_t> release(const std::vector<aw::held_job>& jobs,
                                 bool) override {
    return static_cast<int64_t>(jobs.size());
  }

  caf::error record_starts(const std::vector<aw::held_job>& jobs) override {
    for (auto& j : jobs)
      recorded_starts.push_back(j.id);
    return {};
  }

  caf::expected<int64_t> delete_expired(int) override {
    return int64_t{0};
  }

  caf::expected<std::vector<std::string>> vacuum(int64_t, double) override {
    return std::vector<std::string>{};
  }

  caf::expected<std::vector<aw::periodic_row>> periodic_rows() override {
    return std::vector<aw::periodic_row>{};
  }

  caf::expected<int64_t> enqueue_tick(const aw::periodic_tick&) override {
    return aw::make_error(aw::ec::database_error,
                          "enqueueing a periodic tick: the fake backend has "
                          "no periodic_schedules");
  }

  caf::error check_schema() override {
    return {};
  }

private:
  caf::expected<std::vector<aw::storage::finish_report>>
  write(const std::vector<aw::job_outcome>& outcomes, bool in_doubt,
        bool fused) {
    write_call call;
    call.in_doubt = in_doubt;
    call.fused = fused;
    call.at = now ? now() : time_point{};
    for (auto& o : outcomes) {
      call.jobs.push_back(o.job_id);
      call.kinds.push_back(o.kind);
    }
    auto index = writes.size();
    writes.push_back(call);
    if (unavailable_writes.count(index) > 0)
      return aw::make_error(aw::ec::database_unavailable,
                            "recording outcomes: fake: server closed the "
                            "connection unexpectedly");
    for (auto& o : outcomes)
      if (refused_always.count(o.job_id) > 0
          || (refused.count(o.job_id) > 0
              && o.kind != aw::outcome_kind::retryable_failure))
        return aw::make_error(aw::ec::database_error,
                              "recording outcomes: fake: follow-up of job "
                                + std::to_string(o.job_id) + " refused");
    std::vector<aw::storage::finish_report> reports(outcomes.size());
    for (auto& r : reports)
      r.result = aw::finish_result::applied;
    return reports;
  }

  aw::claim_result next_claim() {
    aw::claim_result out;
    if (claims.empty())
      return out;
    for (auto id : claims.front()) {
      aw::claimed_job job;
      job.id = id;
      job.kind = "noop";
      job.queue = "default";
      job.args = "{}";
      job.attempt = 1;
      out.jobs.push_back(job);
    }
    claims.erase(claims.begin());
    return out;
  }
};

} // namespace aw_test
