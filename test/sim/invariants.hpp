#pragma once
// The invariants of issue 48, part 2, checked at every step of a
// simulation. They keep their own books from what the model reports
// (model_change), what the hooks receive and what the driver does (crashes,
// outages), and never ask the model's code whether it was right: a planted
// mutation in the model must show up here.
//
// "Live execution" means a run whose lease still holds its job: a handler
// may go on after its lease was taken back (a partition, a deadline), but
// nothing it reports can be written any more, and the job may be claimed
// again. So "never two live executions" is "never a claim of a job whose
// lease has not ended".

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actor_worker/messages/job.hpp"

#include "sim/model_database.hpp"

namespace aw_sim {

/// The invariants' names, as a violation reports them.
namespace invariant {
constexpr const char* no_job_lost = "no job lost";
constexpr const char* one_live_execution = "never two live executions of one job";
constexpr const char* no_stale_outcome
  = "no outcome of an earlier run finalizes a later one";
constexpr const char* one_follow_up_set
  = "exactly one set of follow-ups per committed outcome";
constexpr const char* guarded_rescue
  = "no rescue of a lease heartbeated inside its window";
constexpr const char* crash_recovery
  = "a crashed node's jobs run again within the reclaim window";
constexpr const char* uncharged_release = "shutdown releases only uncharged jobs";
constexpr const char* hooks_match_commits
  = "every hook event matches a committed state change";
} // namespace invariant

/// The first invariant a run broke.
struct violation {
  /// One of the names in `invariant`.
  std::string invariant;
  /// What was seen.
  std::string detail;
};

class invariants {
public:
  /// Checks a run over `db` (read only for jobs' kinds and final states).
  /// `crash_bound_ms`: how long after a crash its jobs may stay held.
  invariants(const model_database& db, int64_t crash_bound_ms);

  // -- what happened ---------------------------------------------------------

  /// A change committed in the model.
  void on_change(const model_change& c);
  /// A hook received `e`.
  void on_hook(const aw::job_event& e);
  /// The node of `worker` crashed at virtual time `now_ms`.
  void on_crash(const std::string& worker, int64_t now_ms);
  /// Something no worker controls keeps jobs held until `until_ms`
  /// (virtual): a database outage or partition, every node down. Crash
  /// deadlines that fall before it move past it.
  void hold_crash_deadlines(int64_t until_ms);

  // -- checks -----------------------------------------------------------------

  /// After every step of the scheduler: what must hold by now.
  void check_step(int64_t now_ms);
  /// At the end, faults healed and the cluster drained.
  void check_end();

  /// The first violation, if any.
  const std::optional<violation>& broken() const {
    return first_;
  }

private:
  void fail(const char* which, std::string detail);

  /// A committed transition (a claim or a move of a job).
  struct transition_book {
    int64_t job = 0;
    bool claim = false;
    bool has_event = false;
    aw::event_type event = aw::event_type::started;
    /// Follow-ups it must insert, and how many were inserted so far.
    size_t expected = 0;
    size_t inserted = 0;
    bool in_transaction = false;
    /// Hook events seen for it.
    int hooked = 0;
  };
  /// A crashed node's job that must be taken back.
  struct crash_book {
    std::string worker;
    int64_t job = 0;
    int64_t lease = 0;
    int64_t deadline_ms = 0;
  };

  const model_database& db_;
  int64_t crash_bound_ms_;
  std::optional<violation> first_;
  /// The lease that holds each job now (0: none).
  std::map<int64_t, int64_t> lease_of_;
  /// Each lease's worker and claim time (model clock).
  std::map<int64_t, std::pair<std::string, int64_t>> leases_;
  /// Each worker's last refresh of its row (model clock), and those gone.
  std::map<std::string, int64_t> seen_;
  std::set<std::string> left_;
  /// The heartbeat call that last listed each lease, and the leases taken
  /// back from live workers as claims they no longer hold.
  std::map<int64_t, int64_t> listed_;
  std::set<int64_t> orphaned_;
  std::map<int64_t, transition_book> transitions_;
  /// Transitions whose in-transaction follow-ups must be complete by the
  /// end of the step.
  std::vector<int64_t> to_count_;
  std::vector<crash_book> crashes_;
  /// The latest instant a fault holds jobs until (virtual ms): a crash
  /// during it counts from its end.
  int64_t held_until_ = 0;
};

} // namespace aw_sim
