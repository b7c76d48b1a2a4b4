#pragma once
// An in-process worker node for the suites that need one: an actor system of
// its own (default config) and an aw::runtime on it. Include only from
// suites that run workers: CAF headers are slow to compile.
//
// Teardown order matters. The runtime's blocking pool runs handlers on
// detached threads; a handler still running past the drain finishes later
// and then messages its (dead) executor. The node therefore owns the only
// outside reference to its registry and, after stop(), waits until the
// pool's threads let go of it before the actor system is destroyed.

#include <chrono>
#include <memory>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <boost/test/unit_test.hpp>

#include "app/registry.hpp"
#include "app/runtime.hpp"
#include "pg_fixture.hpp"

namespace aw::test {

class worker_node {
public:
  worker_node(runtime_config cfg, std::shared_ptr<registry> reg)
    : reg_(std::move(reg)), sys_(sys_cfg_) {
    rt_ = std::make_unique<runtime>(sys_, std::move(cfg), reg_);
  }

  ~worker_node() {
    rt_->stop();
    rt_.reset();
    // Every pool thread holds the registry until it exits.
    if (!wait_until([this] { return reg_.use_count() == 1; },
                    std::chrono::seconds{30}))
      BOOST_TEST_MESSAGE("worker_node: pool threads still running after 30 s");
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
