#pragma once
// Agreement with the model (issue 48, part 3): the model database
// (test/sim/model_database.hpp) applies what a schedule's committed steps
// did against the real SQL, in the order they finished, and says where it
// disagrees: a job the real claim handed out that the model would not, an
// outcome one applies and the other refuses, a lease one still holds and
// the other not, and after the drain each job's end (state, failed
// attempts).
//
// The model picks its own jobs in a claim, so each real job is a queue of
// its own in the model ("j<id>"): the mirror claims exactly the jobs the
// real claim took, one lease each. Follow-ups are left out (the schedule
// counts them in the database). A step whose commit is in doubt (its
// connection broke mid-step), and a rescue while rows are locked (the
// real rescue skips locked rows), end the comparison for the rest of that
// schedule: the mirror says so (diverged()).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actor_worker/messages/job.hpp"
#include "actor_worker/storage/backend.hpp"

namespace aw_sim {
class model_database;
}

namespace aw::sim::sql {

/// The model, following a schedule.
class model_mirror {
public:
  /// `max_retries` and `window_ms` as the schedule's workers have them.
  model_mirror(int max_retries, int64_t window_ms);
  ~model_mirror();

  /// Stops comparing for the rest of the schedule, saying why.
  void diverge(const std::string& why);
  /// Whether the comparison stopped, and why.
  bool diverged() const {
    return !why_.empty();
  }
  const std::string& why() const {
    return why_;
  }

  /// The clock jumped by `ms`.
  void jump(int64_t ms);
  /// Job `id` committed (due now, or in `delay_ms`).
  void enqueued(int64_t id, const std::string& kind, int priority,
                int64_t delay_ms);
  /// A real claim of `worker` handed out `jobs`; a disagreement, if any.
  /// `at_ms`: when the claim's step came back (steady clock, ms). The
  /// SQL judged which jobs were due by its transaction's start, some time
  /// in the step; the model judges them as late as that could be.
  std::optional<std::string> claimed(const std::string& worker,
                                     const std::vector<claimed_job>& jobs,
                                     int64_t at_ms);
  /// Real outcomes and their reports; a disagreement, if any. `at_ms`:
  /// when the outcomes' step began (steady clock, ms). A retry is due a
  /// backoff after the SQL transaction's start, some time in the step;
  /// the model dates it as early as that could be.
  std::optional<std::string>
  finished(const std::string& worker, const std::vector<job_outcome>& outs,
           const std::vector<storage::finish_report>& reports, int64_t at_ms);
  /// A heartbeat round: refresh, then which of `held` (job, lease) the
  /// real heartbeat kept (`kept`, real leases); a disagreement, if any.
  std::optional<std::string>
  heartbeat(const std::string& worker, int64_t held_count,
            const std::vector<std::pair<int64_t, int64_t>>& held,
            const std::vector<int64_t>& kept);
  /// Jobs (id, real lease) released.
  void released(const std::string& worker,
                const std::vector<std::pair<int64_t, int64_t>>& jobs,
                bool started);
  /// Starts recorded of jobs (id, real lease).
  void started(const std::vector<std::pair<int64_t, int64_t>>& jobs);
  /// A rescue ran (with no row locked elsewhere).
  void rescued();
  /// After the drain: each job's end in the database, (id -> (state,
  /// error_count)); the disagreements.
  std::vector<std::string>
  ended(const std::map<int64_t, std::pair<std::string, int>>& real);

private:
  /// The model's lease of real job `id` claimed with real lease `lease`.
  int64_t model_lease(int64_t id, int64_t lease) const;

  std::unique_ptr<aw_sim::model_database> db_;
  int64_t offset_ms_ = 0;
  /// The wall time the model's clock stands at while it follows one step
  /// (claimed, finished); else it runs.
  std::optional<int64_t> at_ms_;
  std::string why_;
  /// Real id -> model id.
  std::map<int64_t, int64_t> ids_;
  /// (real id, real lease) -> model lease.
  std::map<std::pair<int64_t, int64_t>, int64_t> leases_;
  /// Model ids a rescue gave back uncharged: their next claim records
  /// their start (migrations/002_job_starts.sql, start_unknown).
  std::set<int64_t> start_unknown_;
};

} // namespace aw::sim::sql
