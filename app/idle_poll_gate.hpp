#pragma once
// An idle poll gate that several runtimes share (the job-worker spec's one
// gate handed to many workers). Of all the pollers of the runtimes it is
// handed to, at most `permits` poll on their idle interval; the others
// park until they are woken (NOTIFY, a local enqueue, a freed slot) or a
// permit passes to them. A poller gives its permit back while it claims
// again on its own or on a timer of its own (claim backoff, a cluster-wide
// limit, a pause), and asks again once its claims come to rest (see
// actors/poll_gate.hpp). The gate never limits claims made on a wake-up,
// running jobs, heartbeats or maintenance: it only bounds the database
// load of idle nodes.
//
//   auto gate = std::make_shared<aw::idle_poll_gate>(sys, 2);
//   aw::runtime billing{sys, billing_cfg, billing_reg, gate};
//   aw::runtime mail{sys, mail_cfg, mail_reg, gate};
//
// Without one, a runtime gates its own pollers when
// `worker.idle_poll_permits` > 0; a shared gate replaces that setting. A
// gate limits pollers within one process: separate processes poll on
// their own.

#include <memory>

#include <caf/fwd.hpp>

namespace aw {

/// An idle poll gate several runtimes share: of all their pollers, at most permits() poll on their idle interval.
class idle_poll_gate {
public:
  /// Spawns the gate on `sys`, which must outlive the gate and every
  /// runtime it is handed to. Throws std::invalid_argument when `permits`
  /// is less than 1.
  idle_poll_gate(caf::actor_system& sys, int permits);

  /// Stops the gate (runtimes hold it through a shared_ptr, so this runs
  /// after the last of them is gone).
  ~idle_poll_gate();

  idle_poll_gate(const idle_poll_gate&) = delete;
  idle_poll_gate& operator=(const idle_poll_gate&) = delete;

  /// How many pollers may poll on their idle interval at once.
  int permits() const {
    return permits_;
  }

  /// The gate's actor, as a poll_gate_actor (messages/actors.hpp).
  const caf::actor& actor() const {
    return *actor_;
  }

private:
  int permits_;
  std::unique_ptr<caf::actor> actor_;
};

} // namespace aw
