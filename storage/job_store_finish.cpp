// job_store::finish and its steps: the outcomes of a batch in one
// statement or transaction (lane completions as receipts, row jobs, the
// other outcomes, parked jobs) with their follow-ups. Split from
// storage/job_store.cpp.

#include "actor_worker/storage/job_store.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/config/seconds.hpp"
#include "actor_worker/messages/outcome.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/internal/job_store_parts.hpp"
#include "sql_statements.hpp"

namespace aw::storage {

namespace {

/// Builds the event of a committed transition.
job_event transition_event(event_type type, std::string json,
                     const job_outcome& o) {
  job_event e;
  e.type = type;
  e.job_json = std::move(json);
  e.duration_ms = o.duration_ms;
  e.message = o.message;
  return e;
}

} // namespace

std::vector<finish_report>
job_store::finish(const std::vector<job_outcome>& outcomes, bool in_doubt,
                  failure_follow_ups failures) {
  // A lane completion recorded twice counts once (an outcome records only
  // jobs no receipt of their batch holds yet), and any other outcome finds
  // its lease no longer running the job: once the server process that may
  // still be committing them is gone, the same statements are right.
  if (in_doubt)
    end_lost_backend();
  connect();
  if (lane_completions_only(outcomes)) {
    // The hot path: one statement in autocommit.
    pqxx::nontransaction tx(*conn_, "aw_finish");
    return finish_in(tx, outcomes, failures);
  }
  pqxx::work tx(*conn_, "aw_finish");
  auto reports = finish_in(tx, outcomes, failures);
  tx.commit();
  return reports;
}

namespace {

/// `report` says the outcome applied, with event `type` of committed row
/// `json`.
void fire(finish_report& report, event_type type, std::string json,
          const job_outcome& o) {
  report.result = finish_result::applied;
  report.event = transition_event(type, std::move(json), o);
  report.has_event = true;
}

bool has_id(const std::vector<int64_t>& sorted_ids, int64_t id) {
  return std::binary_search(sorted_ids.begin(), sorted_ids.end(), id);
}

} // namespace

std::vector<finish_report>
job_store::finish_in(pqxx::transaction_base& tx,
                     const std::vector<job_outcome>& outcomes,
                     failure_follow_ups failures, leases lane_leases) {
  std::vector<finish_report> reports(outcomes.size());
  auto materialized = finish_lane_jobs(tx, outcomes, reports, lane_leases);
  complete_row_jobs(tx, outcomes, reports);
  record_other_outcomes(tx, outcomes, materialized, reports);
  insert_follow_ups(tx, reports, failures);
  return reports;
}

std::vector<int64_t>
job_store::finish_lane_jobs(pqxx::transaction_base& tx,
                            const std::vector<job_outcome>& outcomes,
                            std::vector<finish_report>& reports,
                            leases lane_leases) {
  // Completions become receipts; any other outcome first turns its job
  // into a running row of its batch, for record_other_outcomes. A lane
  // outcome whose batch is no longer ours is stale.
  const auto& me = opts_.worker_id;
  bool deleting = opts_.completed_retention.count() == 0;
  std::vector<int64_t> done_jobs, done_leases, other_jobs, other_leases;
  std::vector<int64_t> observed_done;
  for (auto& o : outcomes) {
    if (!on_lane(o.lease))
      continue;
    if (o.kind == outcome_kind::completed) {
      done_jobs.push_back(o.job_id);
      done_leases.push_back(o.lease);
      if (o.observed)
        observed_done.push_back(o.job_id);
    } else {
      other_jobs.push_back(o.job_id);
      other_leases.push_back(o.lease);
    }
  }
  std::vector<int64_t> recorded, materialized;
  if (!done_jobs.empty())
    for (const auto& row : run(tx, lane_leases == leases::held
                                     ? "aw_transactional_complete_lane"
                                     : "aw_complete_lane",
                               me,
                               to_array_literal(done_leases),
                               to_array_literal(done_jobs), deleting))
      recorded.push_back(row[0].as<int64_t>());
  if (!other_jobs.empty())
    for (const auto& row : run(tx, "aw_materialize", me,
                               to_array_literal(other_leases),
                               to_array_literal(other_jobs)))
      materialized.push_back(row[0].as<int64_t>());
  std::sort(recorded.begin(), recorded.end());
  std::sort(materialized.begin(), materialized.end());
  std::unordered_map<int64_t, std::string> lane_rows;
  if (!observed_done.empty())
    for (const auto& row :
         run(tx, "aw_lane_completed_rows", to_array_literal(observed_done)))
      lane_rows.emplace(row["id"].as<int64_t>(),
                        row["row_json"].as<std::string>());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    auto& o = outcomes[i];
    if (!on_lane(o.lease) || o.kind != outcome_kind::completed
        || !has_id(recorded, o.job_id))
      continue;
    reports[i].result = finish_result::applied;
    if (auto r = lane_rows.find(o.job_id); r != lane_rows.end())
      fire(reports[i], event_type::completed, std::move(r->second), o);
  }
  return materialized;
}

void job_store::complete_row_jobs(pqxx::transaction_base& tx,
                                  const std::vector<job_outcome>& outcomes,
                                  std::vector<finish_report>& reports) {
  // Each guarded by its lease: still running in that batch.
  std::vector<int64_t> completed, completed_leases;
  for (auto& o : outcomes)
    if (!on_lane(o.lease) && o.kind == outcome_kind::completed) {
      completed.push_back(o.job_id);
      completed_leases.push_back(o.lease);
    }
  if (completed.empty())
    return;
  bool deleting = opts_.completed_retention.count() == 0;
  auto rows = run(tx, deleting ? "aw_complete_delete" : "aw_complete",
                  to_array_literal(completed), opts_.worker_id, observed_kinds_,
                  defaults::notify_channel, to_array_literal(completed_leases));
  std::unordered_map<int64_t, std::string> applied;
  for (const auto& row : rows)
    applied.emplace(row["id"].as<int64_t>(),
                    row["row"].is_null() ? std::string{}
                                         : row["row"].as<std::string>());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    auto& o = outcomes[i];
    if (on_lane(o.lease) || o.kind != outcome_kind::completed)
      continue;
    auto a = applied.find(o.job_id);
    if (a == applied.end())
      continue;
    reports[i].result = finish_result::applied;
    // Without observers nobody needs the event: keep the hot path lean.
    if (!a->second.empty())
      fire(reports[i], event_type::completed, std::move(a->second), o);
  }
}

void job_store::record_other_outcomes(pqxx::transaction_base& tx,
                                      const std::vector<job_outcome>& outcomes,
                                      const std::vector<int64_t>& materialized,
                                      std::vector<finish_report>& reports) {
  // Row-claimed jobs and the lane jobs finish_lane_jobs materialized, each
  // guarded by its lease.
  auto single = [&](const char* stmt, auto&&... args) -> std::optional<std::string> {
    auto r = run(tx, stmt, std::forward<decltype(args)>(args)...);
    if (r.empty() || r[0]["row_json"].is_null())
      return std::nullopt;
    return r[0]["row_json"].template as<std::string>();
  };
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    auto& report = reports[i];
    if (o.kind == outcome_kind::completed)
      continue;
    if (on_lane(o.lease) && !has_id(materialized, o.job_id))
      continue; // a stale lane outcome
    switch (o.kind) {
      case outcome_kind::completed:
        break;
      case outcome_kind::retryable_failure:
      case outcome_kind::deadline_exceeded:
      case outcome_kind::retry_after:
      case outcome_kind::abandoned: {
        std::optional<int64_t> delay;
        if (o.kind == outcome_kind::retry_after)
          delay = o.delay_ms;
        // A deadline overrun is a rescue (the lifecycle spec's Rescued,
        // reason deadline_exceeded), whether the handler ended on its
        // cancellation or was given up.
        bool rescue = o.kind == outcome_kind::abandoned
                      || o.kind == outcome_kind::deadline_exceeded;
        if (auto row = single("aw_retry", o.job_id, o.lease, o.message,
                              opts_.max_retries, delay)) {
          fire(report, rescue ? event_type::rescued : event_type::retried,
               std::move(*row), o);
        } else if (auto row = single("aw_dead_letter", o.job_id, o.lease,
                                     o.message, defaults::notify_channel)) {
          fire(report, rescue ? event_type::rescued : event_type::exhausted,
               std::move(*row), o);
        }
        if (rescue && report.has_event)
          report.event.reason = rescue_reason::deadline_exceeded;
        break;
      }
      case outcome_kind::terminal_failure:
        if (auto row = single("aw_dead_letter", o.job_id, o.lease, o.message,
                              defaults::notify_channel))
          fire(report, event_type::exhausted, std::move(*row), o);
        break;
      case outcome_kind::snoozed:
        if (single("aw_snooze", o.job_id, o.lease, o.delay_ms))
          report.result = finish_result::applied; // snoozes fire nothing
        break;
      case outcome_kind::cancelled:
        if (auto row = single("aw_cancel", o.job_id, o.lease, o.message,
                              defaults::notify_channel))
          fire(report, event_type::cancelled, std::move(*row), o);
        break;
      case outcome_kind::waiting_callback:
        park(tx, o, report);
        break;
    }
  }
}

void job_store::park(pqxx::transaction_base& tx, const job_outcome& o,
                     finish_report& report) {
  auto r = run(tx, "aw_wait", o.job_id, o.lease, o.delay_ms);
  if (r.empty())
    return;
  fire(report, event_type::waiting_for_callback,
       r[0]["row_json"].as<std::string>(), o);
  // A resolution that came while the job ran (it registered its id) is
  // applied now: the park and it commit together.
  if (r[0]["early"].is_null())
    return;
  auto kept = parse_kept_resolution(r[0]["early"].as<std::string>());
  auto applied = apply_callback(tx, r[0]["callback_id"].as<std::string>(),
                                kept.action, kept.payload, kept.error);
  if (applied.has_event) {
    report.has_resolution = true;
    report.resolution = std::move(applied.event);
  }
}

void job_store::insert_follow_ups(pqxx::transaction_base& tx,
                                  const std::vector<finish_report>& reports,
                                  failure_follow_ups failures) {
  // Durable follow-ups: inserted in this transaction, so they commit with
  // the transitions that trigger them, or not at all. A rescue's follow-ups
  // are best effort after its commit (the storage actor runs them), and so
  // are a failure's (a retry, a dead-lettering) when the caller says so.
  if (!follow_ups_)
    return;
  auto after_commit = [&](const job_event& e) {
    return e.type == event_type::rescued
           || ((e.type == event_type::exhausted || e.type == event_type::retried)
               && failures == failure_follow_ups::after_commit);
  };
  std::vector<enqueue_request> requests;
  for (auto& r : reports) {
    if (r.has_event && !r.event.job_json.empty() && !after_commit(r.event)) {
      auto more = follow_ups_of(follow_ups_, r.event);
      std::move(more.begin(), more.end(), std::back_inserter(requests));
    }
    if (r.has_resolution && !after_commit(r.resolution)) {
      auto more = follow_ups_of(follow_ups_, r.resolution);
      std::move(more.begin(), more.end(), std::back_inserter(requests));
    }
  }
  if (!requests.empty())
    enqueue_many(tx, requests);
}

} // namespace aw::storage
