#include "sim/model_mutations.hpp"

#include <cstdlib>
#include <stdexcept>

namespace aw_sim {

const char* const* model_mutations::names() {
#ifdef AW_SIM_MUTATIONS
  static const char* const known[] = {"claim_no_recheck", "outcome_by_id",
                                      "rescue_unguarded", "followup_twice",
                                      nullptr};
#else
  static const char* const known[] = {nullptr};
#endif
  return known;
}

bool model_mutations::enable(const std::string& name) {
#ifdef AW_SIM_MUTATIONS
  if (name == "claim_no_recheck")
    return claim_no_recheck = true;
  if (name == "outcome_by_id")
    return outcome_by_id = true;
  if (name == "rescue_unguarded")
    return rescue_unguarded = true;
  if (name == "followup_twice")
    return followup_twice = true;
#endif
  static_cast<void>(name);
  return false;
}

model_mutations model_mutations::from_environment() {
  model_mutations out;
  auto name = std::getenv("AW_SIM_MUTATION");
  if (name == nullptr || *name == '\0')
    return out;
  if (!out.enable(name))
    throw std::invalid_argument(
      std::string{"AW_SIM_MUTATION="} + name
      + ": this build has no such mutation (mutations exist only in a build "
        "configured with -DAW_SIM_MUTATIONS=ON, as scripts/simulate.sh "
        "makes)");
  return out;
}

} // namespace aw_sim
