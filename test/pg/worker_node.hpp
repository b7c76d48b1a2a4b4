#pragma once
// An in-process worker node for the suites that need one: an actor system of
// its own (default config) and an aw::runtime on it. Include only from
// suites that run workers: CAF headers are slow to compile.
//
// runtime::stop() cuts every handler off the actor system before it
// returns, so the system may go right after it, even while a handler that
// ignored its cancellation still runs.

#include <chrono>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <boost/test/unit_test.hpp>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "pg_fixture.hpp"

namespace aw::test {

class worker_node {
public:
  worker_node(runtime_config cfg, std::shared_ptr<registry> reg,
              std::shared_ptr<idle_poll_gate> gate = nullptr)
    : reg_(std::move(reg)), sys_(sys_cfg_) {
    rt_ = std::make_unique<runtime>(sys_, std::move(cfg), reg_,
                                    std::move(gate));
  }

  ~worker_node() {
    auto report = rt_->stop();
    if (report.abandoned > 0)
      BOOST_TEST_MESSAGE("worker_node: " << report.abandoned
                                         << " handler(s) abandoned at stop");
    rt_.reset();
  }

  worker_node(const worker_node&) = delete;
  worker_node& operator=(const worker_node&) = delete;

  runtime& rt() {
    return *rt_;
  }

private:
  std::shared_ptr<registry> reg_;
  caf::actor_system_config sys_cfg_;
  caf::actor_system sys_;
  std::unique_ptr<runtime> rt_;
};

} // namespace aw::test
