#pragma once
// Planted bugs of the model database, to prove the simulation finds the
// bugs the queues we learn from shipped (issue 48, part 4). Each is
// switched on at run time by AW_SIM_MUTATION=NAME, but only in a build
// configured with -DAW_SIM_MUTATIONS=ON (scripts/simulate.sh's build-sim):
// without that definition every switch is a constant false and the code
// behind it is dead, so the normal build cannot run a mutation.
//
// - claim_no_recheck: the claim takes a job without re-checking that it is
//   still due (it also takes running jobs, as a claim that picked its rows
//   from an old snapshot and did not re-check them would: awa's bug).
// - outcome_by_id: an outcome applies to a running job whatever lease it
//   carries (Oban #1496: a stale settlement by id only).
// - rescue_unguarded: the rescue takes back leases without checking that
//   their worker stopped refreshing its row (River #1302: the rescuer
//   overwrote jobs it should have left alone).
// - followup_twice: the follow-ups of an outcome are inserted twice.
//
// tick_skips_late (issue 48) has no counterpart here: the model has no
// ticks or snapshots (a claim sees every committed row at once); it lives
// in the SQL schedules of `scripts/simulate.sh --sql`.

#include <string>

namespace aw_sim {

/// Which planted mutations are on.
struct model_mutations {
  bool claim_no_recheck = false;
  bool outcome_by_id = false;
  bool rescue_unguarded = false;
  bool followup_twice = false;

  /// The names this build knows (empty without AW_SIM_MUTATIONS).
  static const char* const* names();

  /// Switches on the mutation `name`; false when this build has no such
  /// mutation (or none at all).
  bool enable(const std::string& name);

  /// From AW_SIM_MUTATION (unset or empty: none). Throws
  /// std::invalid_argument for a name this build does not have.
  static model_mutations from_environment();
};

/// In a build without AW_SIM_MUTATIONS a mutation is never on: the branches
/// behind it fold away.
#ifdef AW_SIM_MUTATIONS
#define AW_SIM_MUTATED(m, name) ((m).name)
#else
#define AW_SIM_MUTATED(m, name) false
#endif

} // namespace aw_sim
