#pragma once
// The durable follow-ups of the simulated job kinds, and how many each
// transition must insert: the simulator gives the first to the model as
// its follow_up_function, the invariants count against the second.
//
// Kind "chain" enqueues one "leaf" job when it completes, is dead-lettered
// or is rescued; "plain" and "leaf" enqueue nothing.

#include <string>
#include <vector>

#include "actor_worker/messages/enqueue_request.hpp"
#include "actor_worker/messages/job.hpp"

namespace aw_sim {

/// How many follow-ups a transition `type` of a job of `kind` inserts.
inline size_t expected_follow_ups(aw::event_type type, const std::string& kind) {
  if (kind != "chain")
    return 0;
  switch (type) {
    case aw::event_type::completed:
    case aw::event_type::exhausted:
    case aw::event_type::rescued:
      return 1;
    default:
      return 0;
  }
}

/// The follow-ups of a committed transition.
inline std::vector<aw::enqueue_request> follow_ups_of(const aw::job_event& e) {
  std::vector<aw::enqueue_request> out;
  for (size_t i = 0; i < expected_follow_ups(e.type, e.kind); ++i) {
    aw::enqueue_request r;
    r.kind = "leaf";
    r.args = {{"after", aw::to_string(e.type)}};
    r.options.max_attempts = 2;
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace aw_sim
