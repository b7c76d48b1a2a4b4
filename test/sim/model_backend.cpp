#include "sim/model_backend.hpp"

#include <exception>

#include "actor_worker/messages/error.hpp"

namespace aw_sim {

namespace {

/// Stands for "no value" in calls that return only an error.
struct nothing {};

} // namespace

model_backend::model_backend(std::shared_ptr<model_database> db,
                             std::string worker,
                             aw::storage::follow_up_function follow_ups,
                             connection_faults faults)
  : db_(std::move(db)),
    worker_(std::move(worker)),
    follow_ups_(std::move(follow_ups)),
    faults_(std::move(faults)) {
  // nop
}

template <class T, class F>
caf::expected<T> model_backend::call(const char* name, F&& body) {
  auto fault = faults_ ? faults_(name) : call_fault::none;
  auto unavailable = [&] {
    return aw::make_error(aw::ec::database_unavailable,
                          std::string{name}
                            + ": model: server closed the connection "
                              "unexpectedly");
  };
  if (fault == call_fault::lost_connection)
    return unavailable();
  try {
    T result = db_->transaction(body);
    if (fault == call_fault::lost_reply)
      return unavailable();
    return result;
  } catch (const std::exception& e) {
    return aw::make_error(aw::ec::database_error,
                          std::string{name} + ": model: " + e.what());
  }
}

caf::expected<aw::claim_result>
model_backend::claim(const aw::storage::claim_request& req) {
  return call<aw::claim_result>("claim",
                                [&] { return db_->claim(worker_, req); });
}

caf::expected<std::pair<std::vector<aw::storage::finish_report>, aw::claim_result>>
model_backend::finish_and_claim(const std::vector<aw::job_outcome>& outcomes,
                                const aw::storage::claim_request& req, bool) {
  // in_doubt needs nothing here: an outcome that committed before finds
  // its lease gone and is reported stale, as in PostgreSQL.
  using both = std::pair<std::vector<aw::storage::finish_report>, aw::claim_result>;
  return call<both>("finish_and_claim", [&] {
    auto reports = db_->finish(worker_, outcomes,
                               aw::storage::failure_follow_ups::in_transaction,
                               follow_ups_);
    return both{std::move(reports), db_->claim(worker_, req)};
  });
}

caf::expected<std::vector<aw::storage::finish_report>>
model_backend::finish(const std::vector<aw::job_outcome>& outcomes, bool,
                      aw::storage::failure_follow_ups failures) {
  return call<std::vector<aw::storage::finish_report>>("finish", [&] {
    return db_->finish(worker_, outcomes, failures, follow_ups_);
  });
}

caf::expected<std::vector<int64_t>>
model_backend::heartbeat(const std::vector<int64_t>& leases) {
  return call<std::vector<int64_t>>(
    "heartbeat", [&] { return db_->heartbeat(worker_, leases); });
}

caf::expected<std::vector<int64_t>>
model_backend::cancel_requests(const std::vector<int64_t>& jobs) {
  return call<std::vector<int64_t>>(
    "cancel_requests", [&] { return db_->cancel_requests(jobs); });
}

caf::expected<std::vector<aw::rescued_job>> model_backend::rescue(int limit) {
  return call<std::vector<aw::rescued_job>>(
    "rescue", [&] { return db_->rescue(limit); });
}

caf::error
model_backend::enqueue_follow_ups(const std::vector<aw::job_event>& events) {
  auto r = call<nothing>("enqueue_follow_ups", [&] {
    db_->enqueue_follow_ups(events, follow_ups_);
    return nothing{};
  });
  return r ? caf::error{} : std::move(r.error());
}

caf::expected<int64_t>
model_backend::release(const std::vector<aw::held_job>& jobs, bool started) {
  return call<int64_t>("release",
                       [&] { return db_->release(worker_, jobs, started); });
}

caf::error model_backend::record_starts(const std::vector<aw::held_job>& jobs) {
  auto r = call<nothing>("record_starts", [&] {
    db_->record_starts(jobs);
    return nothing{};
  });
  return r ? caf::error{} : std::move(r.error());
}

caf::expected<int64_t> model_backend::delete_expired(int) {
  // Finished rows stay: the invariants read them at the end.
  return call<int64_t>("delete_expired", [] { return int64_t{0}; });
}

caf::expected<std::vector<std::string>> model_backend::vacuum(int64_t, double) {
  return call<std::vector<std::string>>(
    "vacuum", [] { return std::vector<std::string>{}; });
}

caf::expected<bool> model_backend::refresh_node(int64_t held, bool candidate) {
  return call<bool>("refresh_node", [&] {
    return db_->refresh_node(worker_, held, candidate);
  });
}

caf::expected<bool> model_backend::resign() {
  return call<bool>("resign", [&] { return db_->resign(worker_); });
}

caf::error model_backend::leave() {
  auto r = call<nothing>("leave", [&] {
    db_->leave(worker_);
    return nothing{};
  });
  return r ? caf::error{} : std::move(r.error());
}

caf::expected<std::vector<aw::periodic_row>> model_backend::periodic_rows() {
  return std::vector<aw::periodic_row>{};
}

caf::expected<int64_t> model_backend::enqueue_tick(const aw::periodic_tick&) {
  return aw::make_error(aw::ec::database_error,
                        "enqueue_tick: the model has no periodic_schedules");
}

caf::error model_backend::check_schema() {
  auto r = call<nothing>("check_schema", [] { return nothing{}; });
  return r ? caf::error{} : std::move(r.error());
}

} // namespace aw_sim
