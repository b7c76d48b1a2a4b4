#include "actor_worker/actors/poll_gate.hpp"

#include <algorithm>

#include <caf/system_messages.hpp>

namespace aw {

namespace {

bool holds(poll_gate_pointer self, const poller_actor& p) {
  auto& h = self->state.holders;
  return std::find(h.begin(), h.end(), p) != h.end();
}

void grant(poll_gate_pointer self, poller_actor p) {
  self->state.holders.push_back(p);
  self->send(p, permit_atom::value);
}

/// A permit came back: the longest waiting poller gets it.
void release(poll_gate_pointer self, const poller_actor& p) {
  auto& st = self->state;
  auto i = std::find(st.holders.begin(), st.holders.end(), p);
  if (i == st.holders.end())
    return;
  st.holders.erase(i);
  if (st.waiting.empty()) {
    ++st.free_permits;
    return;
  }
  auto next = st.waiting.front();
  st.waiting.pop_front();
  grant(self, next);
}

} // namespace

poll_gate_actor::behavior_type poll_gate_behavior(poll_gate_pointer self,
                                                  int permits) {
  self->state.free_permits = permits;
  // A poller that dies holding a permit must not take it along.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& h : st.holders)
      if (h.address() == dm.source) {
        release(self, poller_actor{h});
        break;
      }
    st.waiting.erase(std::remove_if(st.waiting.begin(), st.waiting.end(),
                                    [&](const poller_actor& w) {
                                      return w.address() == dm.source;
                                    }),
                     st.waiting.end());
  });
  return {
    [self](permit_atom, poller_actor p) {
      auto& st = self->state;
      if (holds(self, p)
          || std::find(st.waiting.begin(), st.waiting.end(), p)
               != st.waiting.end())
        return;
      self->monitor(p);
      if (st.free_permits > 0) {
        --st.free_permits;
        grant(self, std::move(p));
      } else {
        st.waiting.push_back(std::move(p));
      }
    },
    [self](giveback_atom, const poller_actor& p) { release(self, p); },
    [self](rotate_atom, poller_actor p) {
      auto& st = self->state;
      if (!holds(self, p)) {
        // Not a holder (its permit went with a down message): a request.
        self->send(self, permit_atom::value, std::move(p));
        return;
      }
      if (st.waiting.empty()) {
        self->send(p, permit_atom::value); // nobody else wants it: poll
        return;
      }
      st.holders.erase(std::find(st.holders.begin(), st.holders.end(), p));
      auto next = st.waiting.front();
      st.waiting.pop_front();
      st.waiting.push_back(std::move(p));
      grant(self, std::move(next));
    },
  };
}

} // namespace aw
