#pragma once
// How often the simulator injects each fault: the chance of each per
// chaos tick (every 250 ms of virtual time, per cluster), and per backend
// call for the connection faults. Profiles by name for --faults.

#include <stdexcept>
#include <string>

namespace aw_sim {

struct fault_profile {
  std::string name = "default";
  /// A node dies at once (kill -9): its unflushed outcomes are lost, its
  /// jobs held until a rescue.
  double crash = 0.01;
  /// A node stops gracefully (drain, release, leave).
  double stop = 0.005;
  /// One node loses the database for 1-15 s (every call fails).
  double partition = 0.01;
  /// The database hangs or is down for 0.5-8 s (every node's calls fail:
  /// the statements time out).
  double hung_database = 0.004;
  /// The database is slow for 0.2-5 s: every statement waits that long
  /// and then succeeds (storage actors are not run meanwhile).
  double slow_database = 0.005;
  /// The database server's clock jumps forward by up to two reclaim
  /// windows.
  double clock_jump = 0.003;
  /// An operator asks to cancel a job.
  double cancel_request = 0.01;
  /// Per backend call: the connection is lost before it.
  double lost_connection = 0.01;
  /// Per backend call: it commits and its reply is lost.
  double lost_reply = 0.01;
  /// Handlers throw, hang or overrun their deadline (else they complete
  /// or fail only as the plan's ordinary outcomes).
  bool bad_handlers = true;

  /// "default" (everything), "none" (no faults, ordinary outcomes only),
  /// "crash" (crashes and stops), "network" (partitions, lost
  /// connections and replies, a hung database), "clock" (clock jumps),
  /// "handlers" (bad handlers only).
  static fault_profile named(const std::string& name) {
    fault_profile p;
    p.name = name;
    if (name == "default")
      return p;
    fault_profile none;
    none.name = name;
    none.crash = none.stop = none.partition = none.hung_database = 0;
    none.slow_database = 0;
    none.clock_jump = none.cancel_request = none.lost_connection = 0;
    none.lost_reply = 0;
    none.bad_handlers = false;
    if (name == "none")
      return none;
    if (name == "crash") {
      none.crash = p.crash * 2;
      none.stop = p.stop * 2;
      return none;
    }
    if (name == "network") {
      none.partition = p.partition * 2;
      none.hung_database = p.hung_database * 2;
      none.slow_database = p.slow_database * 2;
      none.lost_connection = p.lost_connection * 2;
      none.lost_reply = p.lost_reply * 2;
      return none;
    }
    if (name == "clock") {
      none.clock_jump = p.clock_jump * 4;
      return none;
    }
    if (name == "handlers") {
      none.bad_handlers = true;
      none.cancel_request = p.cancel_request;
      return none;
    }
    throw std::invalid_argument("unknown fault profile '" + name
                                + "' (default, none, crash, network, clock, "
                                  "handlers)");
  }
};

} // namespace aw_sim
