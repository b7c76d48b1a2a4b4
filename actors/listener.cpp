#include "actor_worker/actors/listener.hpp"

#include <cstdlib>
#include <set>

#include <spdlog/spdlog.h>

#include "actor_worker/storage/db_error.hpp"

namespace aw {

listener_internal::behavior_type
listener_behavior(listener_pointer self, std::string url,
                  supervisor_actor wake_target) {
  self->state.conn = std::make_unique<storage::notification_listener>(
    std::move(url), std::vector<std::string>{defaults::notify_channel,
                                             defaults::cancel_channel,
                                             defaults::leader_channel,
                                             defaults::queue_controls_channel});
  self->state.wake_target = std::move(wake_target);
  self->send(self, listen_atom::value);
  return {
    [self](listen_atom) {
      auto& st = self->state;
      try {
        bool connecting = !st.conn->connected();
        st.conn->connect();
        if (connecting) {
          if (st.reconnect_backoff.failures() > 0)
            spdlog::info("listener: listening again after {} failed "
                         "attempt(s)",
                         st.reconnect_backoff.failures());
          // NOTIFYs sent before LISTEN took effect (while starting, or
          // while the connection was away) were never heard: a job
          // enqueued between the pollers' first claim and now would
          // otherwise wait for the idle poll. Look everywhere once.
          self->send(st.wake_target, wake_atom::value, std::string{});
        }
        st.reconnect_backoff.reset();
        auto received = st.conn->wait_for(defaults::listen_wait);
        std::set<std::string> queues;
        bool elect = false;
        for (auto& n : received) {
          if (n.channel == defaults::leader_channel) {
            // The leader resigned: candidates try to take over now.
            elect = true;
            continue;
          }
          if (n.channel == defaults::queue_controls_channel) {
            // A pause changed (queue_controls' trigger, migrations/016):
            // "pause:QUEUE" or "resume:QUEUE".
            auto colon = n.payload.find(':');
            if (colon == std::string::npos)
              continue;
            auto verb = n.payload.substr(0, colon);
            if (verb == "pause" || verb == "resume")
              self->send(st.wake_target, pause_atom::value,
                         n.payload.substr(colon + 1), verb == "pause");
            continue;
          }
          if (n.channel != defaults::cancel_channel) {
            queues.insert(n.payload);
            continue;
          }
          // `jobs cancel` of a running job: the payload is its id.
          char* end = nullptr;
          auto id = std::strtoll(n.payload.c_str(), &end, 10);
          if (id > 0 && end != nullptr && *end == '\0')
            self->send(st.wake_target, cancel_atom::value, int64_t{id});
        }
        for (auto& q : queues)
          self->send(st.wake_target, wake_atom::value, q);
        if (elect)
          self->send(st.wake_target, elect_atom::value);
        self->send(self, listen_atom::value);
      } catch (const std::exception& e) {
        st.conn->disconnect();
        auto delay = st.reconnect_backoff.next();
        spdlog::error("listener: LISTEN connection failed, retrying in {} ms: "
                      "{}",
                      delay.count(), storage::one_line(e));
        self->delayed_send(self, delay, listen_atom::value);
      }
    },
  };
}

} // namespace aw
