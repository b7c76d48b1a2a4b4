#pragma once
// The invariants a schedule checks against the database after every step
// (issue 48, part 2, as far as the SQL can tell them), read on the
// scheduler's own connection:
//  - no_job_lost: every committed job shows exactly once, in `jobs` or in
//    dead_letter_jobs; a rolled-back one never; after the drain every job
//    has ended (a job no claim ever hands out is lost too);
//  - one_follow_up_set: a completed `fu` job has exactly one follow-up,
//    any other none (follow-ups commit with their outcome);
//  - one_live_lease, stale_outcome_refused, live_outcome_applied,
//    no_rescue_of_live_lease: checked by the schedule (schedule.cpp) at
//    the step that would break them, with lease_taken_back() here.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pqxx {
class connection_base;
}

namespace aw::sim::sql {

/// What became of every token (args.t) the enqueuers inserted.
class token_book {
public:
  enum class fate { committed, rolled_back, in_doubt };
  void committed(const std::string& t) {
    book_[t] = fate::committed;
  }
  void rolled_back(const std::string& t) {
    book_[t] = fate::rolled_back;
  }
  void in_doubt(const std::string& t) {
    book_[t] = fate::in_doubt;
  }
  const std::map<std::string, fate>& all() const {
    return book_;
  }
  int committed_count() const;

private:
  std::map<std::string, fate> book_;
};

/// (invariant, what was seen)
using finding = std::pair<std::string, std::string>;

/// The database side of the invariants.
class checks {
public:
  /// Prepares the checks' statements on `conn`.
  explicit checks(pqxx::connection_base& conn);

  /// After every step: no_job_lost (as far as it shows now) and
  /// one_follow_up_set.
  std::vector<finding> after_step(const token_book& tokens);

  /// After the drain: after_step(), and every job ended.
  std::vector<finding> after_drain(const token_book& tokens);

  /// Every job's end: id -> (state, or dead_letter; error_count).
  std::map<int64_t, std::pair<std::string, int>> ends();

  /// Whether a rescue or a take-back ended lease `lease` (its batch is
  /// marked rescued, or is gone).
  bool lease_taken_back(int64_t lease);

private:
  pqxx::connection_base& conn_;
};

} // namespace aw::sim::sql
