#include "actor_worker/app/idle_poll_gate.hpp"

#include <stdexcept>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/send.hpp>

#include "actor_worker/actors/poll_gate.hpp"

namespace aw {

idle_poll_gate::idle_poll_gate(caf::actor_system& sys, int permits)
  : permits_(permits) {
  if (permits < 1)
    throw std::invalid_argument("idle_poll_gate: permits must be at least 1, "
                                "got "
                                + std::to_string(permits));
  actor_ = std::make_unique<caf::actor>(
    caf::actor_cast<caf::actor>(sys.spawn(poll_gate_behavior, permits)));
}

idle_poll_gate::~idle_poll_gate() {
  caf::anon_send_exit(*actor_, caf::exit_reason::user_shutdown);
}

} // namespace aw
