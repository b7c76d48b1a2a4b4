#pragma once
// One connection of one worker to the model database: the storage::backend
// that the storage actors of a simulated node own instead of pg_backend.
// Each call is one transaction of model_database (all or nothing).
//
// Faults are asked for per call (connection_faults): a connection lost
// before the call (nothing applied, ec::database_unavailable), or a commit
// whose reply is lost (applied, and still reported as
// ec::database_unavailable, as a connection that broke during COMMIT).
// A follow-up function that throws rolls the call back and reports
// ec::database_error, as the database refusing the insert would.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actor_worker/storage/backend.hpp"

#include "sim/model_database.hpp"

namespace aw_sim {

/// What happens to one backend call.
enum class call_fault : uint8_t {
  /// It runs and answers.
  none,
  /// The connection is gone before the call: nothing applied, reported
  /// as database_unavailable.
  lost_connection,
  /// It commits and the reply is lost: applied, reported as
  /// database_unavailable (the caller cannot tell it from lost_connection).
  lost_reply,
};

/// Decides the fault of each call, by the call's name ("claim", "finish",
/// ...). Empty: no faults.
using connection_faults = std::function<call_fault(const char* call)>;

class model_backend : public aw::storage::backend {
public:
  /// A connection of `worker` to `db`; `follow_ups` computes the durable
  /// follow-ups of committed transitions (as pg_backend's).
  model_backend(std::shared_ptr<model_database> db, std::string worker,
                aw::storage::follow_up_function follow_ups,
                connection_faults faults);

  caf::expected<aw::claim_result>
  claim(const aw::storage::claim_request& req) override;
  caf::expected<std::pair<std::vector<aw::storage::finish_report>,
                          aw::claim_result>>
  finish_and_claim(const std::vector<aw::job_outcome>& outcomes,
                   const aw::storage::claim_request& req,
                   bool in_doubt) override;
  caf::expected<std::vector<aw::storage::finish_report>>
  finish(const std::vector<aw::job_outcome>& outcomes, bool in_doubt,
         aw::storage::failure_follow_ups failures) override;
  caf::expected<std::vector<int64_t>>
  heartbeat(const std::vector<int64_t>& leases) override;
  caf::expected<std::vector<int64_t>>
  cancel_requests(const std::vector<int64_t>& jobs) override;
  caf::expected<std::vector<aw::rescued_job>> rescue(int limit) override;
  caf::error enqueue_follow_ups(const std::vector<aw::job_event>& events) override;
  caf::expected<int64_t> release(const std::vector<aw::held_job>& jobs,
                                 bool started) override;
  caf::error record_starts(const std::vector<aw::held_job>& jobs) override;
  caf::expected<int64_t> delete_expired(int batch) override;
  caf::expected<std::vector<std::string>> vacuum(int64_t min_dead,
                                                 double share) override;
  caf::expected<bool> refresh_node(int64_t held, bool candidate) override;
  caf::expected<bool> resign() override;
  caf::error leave() override;
  caf::expected<std::vector<aw::periodic_row>> periodic_rows() override;
  caf::expected<int64_t> enqueue_tick(const aw::periodic_tick& tick) override;
  caf::error check_schema() override;

private:
  /// Runs `body` as the transaction of call `name` under its fault:
  /// returns its result, or the error the fault (or a throwing follow-up)
  /// makes of it.
  template <class T, class F>
  caf::expected<T> call(const char* name, F&& body);

  std::shared_ptr<model_database> db_;
  std::string worker_;
  aw::storage::follow_up_function follow_ups_;
  connection_faults faults_;
};

} // namespace aw_sim
