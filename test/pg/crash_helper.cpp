// pg_crash_helper DATABASE_URL MARKER_DIR
//
// A worker process that follow_up_test kills with SIGKILL between an
// outcome's commit and its hook dispatch. Kinds:
//   blocker  no-op; its hook writes MARKER_DIR/hooks_blocked and then never
//            returns, so the hook dispatcher handles no later event;
//   trigger  no-op; its completion enqueues a durable follow-up `after`
//            ({"trigger_id": ID}, queue `after`, which this process does
//            not serve) in the same transaction, and its hook
//            writes MARKER_DIR/hook_<event>_<ID> for every event it sees.
// Writes MARKER_DIR/started once the runtime is up; runs until killed.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <nlohmann/json.hpp>

#include "actor_worker/app/registry.hpp"
#include "actor_worker/app/runtime.hpp"
#include "actor_worker/config/config.hpp"

namespace {

struct after_args {
  static constexpr const char* kind = "after";
  int64_t trigger_id = 0;
};

void to_json(nlohmann::json& j, const after_args& a) {
  j = {{"trigger_id", a.trigger_id}};
}

} // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DATABASE_URL MARKER_DIR\n", argv[0]);
    return 2;
  }
  std::string url = argv[1];
  std::string dir = argv[2];
  auto touch = [dir](const std::string& name) {
    std::ofstream{dir + "/" + name} << "x\n";
  };
  auto reg = std::make_shared<aw::registry>();
  reg->add_raw("blocker", [](const nlohmann::json&, const aw::job_context&) {});
  reg->add_raw("trigger", [](const nlohmann::json&, const aw::job_context&) {});
  reg->on_event_kind("blocker", [touch](const aw::event&) {
    touch("hooks_blocked");
    for (;;)
      std::this_thread::sleep_for(1h);
  });
  reg->on_event_kind("trigger", [touch](const aw::event& e) {
    touch(std::string{"hook_"} + aw::to_string(e.type) + "_"
          + std::to_string(e.job_id()));
  });
  // In a queue nobody serves, so the follow-up stays in `jobs` as it was
  // committed.
  reg->on_completed_enqueue<nlohmann::json>(
    "trigger", [](const nlohmann::json&, const nlohmann::json& job) {
      aw::enqueue_request r;
      r.kind = after_args::kind;
      r.args = after_args{job.at("id").get<int64_t>()};
      r.options.queue = "after";
      return r;
    });

  aw::runtime_config cfg;
  cfg.database.url = url;
  cfg.worker.node = "crash";
  cfg.worker.poll_interval = 100ms;
  aw::queue_config q;
  q.concurrency = 4;
  cfg.queues.push_back(q);
  cfg.validate();

  caf::actor_system_config sys_cfg;
  caf::actor_system sys{sys_cfg};
  aw::runtime rt{sys, cfg, reg};
  touch("started");
  for (;;)
    std::this_thread::sleep_for(1h);
}
