#include "actor_worker/actors/periodic_scheduler.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actor_worker/messages/error.hpp"
#include "actor_worker/messages/printable.hpp"

namespace aw {

namespace {

using clock_type = std::chrono::system_clock;

clock_type::time_point now(periodic_pointer self) {
  auto& f = self->state.cfg.wall_clock;
  return f ? f() : clock_type::now();
}

std::string at(cron_time t) {
  return format_utc(t);
}

/// Sleeps until `delay` from now, replacing any earlier timer.
void arm(periodic_pointer self, std::chrono::milliseconds delay) {
  auto& st = self->state;
  delay = std::clamp(delay, std::chrono::milliseconds{1}, st.cfg.max_sleep);
  self->delayed_send(self, delay, tick_atom::value, ++st.generation);
}

/// Sleeps until the earliest next tick.
void sleep_until_next(periodic_pointer self) {
  auto& st = self->state;
  std::optional<cron_time> earliest;
  for (auto& e : st.entries)
    if (e.next && (!earliest || *e.next < *earliest))
      earliest = e.next;
  if (!earliest) {
    arm(self, st.cfg.max_sleep);
    return;
  }
  auto delay = std::chrono::ceil<std::chrono::milliseconds>(
    clock_type::time_point{*earliest} - now(self));
  arm(self, delay);
}

/// The tick to enqueue for entry `e`, whose next tick is due at `t`:
/// the latest tick at or before `t`, unless it is missed (older than the
/// grace) and catch_up = "none"; then nothing, and `e` moves past `t`.
std::optional<cron_time> due_tick(periodic_pointer self, periodic_entry& e,
                                  clock_type::time_point t) {
  auto latest = e.schedule.latest_at_or_before(t);
  if (!latest || (e.next && *latest < *e.next))
    latest = e.next; // cannot happen for a due entry; stay safe
  bool missed = t - clock_type::time_point{*latest} > self->state.cfg.misfire_grace;
  if (latest != e.next)
    spdlog::info("periodic '{}': the ticks from {} to {} came due while no "
                 "scheduler enqueued them; the latest stands for all",
                 printable(e.config.name), at(*e.next), at(*latest));
  if (!missed)
    return latest;
  if (e.config.catch_up == catch_up_policy::latest) {
    spdlog::info("periodic '{}': catching up on the missed tick {} (catch_up = "
                 "\"latest\")",
                 printable(e.config.name), at(*latest));
    return latest;
  }
  spdlog::info("periodic '{}': skipping the missed tick {} (catch_up = \"none\")",
               printable(e.config.name), at(*latest));
  e.next = e.schedule.next_after(t);
  return std::nullopt;
}

void load(periodic_pointer self);

/// Enqueues the first due tick, then (when its reply comes) the next,
/// until none is due; then sleeps until the next tick.
void run_due(periodic_pointer self) {
  auto& st = self->state;
  if (st.busy)
    return;
  if (!st.loaded) {
    load(self);
    return;
  }
  auto t = now(self);
  for (size_t i = 0; i < st.entries.size(); ++i) {
    auto& e = st.entries[i];
    if (!e.next || clock_type::time_point{*e.next} > t)
      continue;
    auto tick = due_tick(self, e, t);
    if (!tick)
      continue;
    periodic_tick msg;
    msg.name = e.config.name;
    msg.spec = e.config.spec();
    msg.tick = tick->time_since_epoch().count();
    msg.kind = e.config.kind;
    msg.args = e.config.args_json;
    msg.queue = e.config.queue;
    msg.priority = e.config.priority;
    st.busy = true;
    auto tick_at = *tick;
    self->request(st.cfg.store, caf::infinite, periodic_atom::value, std::move(msg))
      .then(
        [self, i, tick_at](int64_t id) {
          auto& st = self->state;
          st.busy = false;
          st.retry.reset();
          auto& e = st.entries[i];
          if (id > 0)
            spdlog::debug("periodic '{}': enqueued job {} for the tick {}",
                          printable(e.config.name), id, at(tick_at));
          else
            spdlog::debug("periodic '{}': the tick {} was enqueued elsewhere",
                          printable(e.config.name), at(tick_at));
          e.next = e.schedule.next_after(tick_at);
          run_due(self);
        },
        [self](caf::error& err) {
          // storage logged it at ERROR; the tick stays due.
          auto& st = self->state;
          st.busy = false;
          auto delay = st.retry.next();
          spdlog::warn("periodic: enqueueing a tick failed ({}); trying again "
                       "in {}",
                       render(err), format_duration(delay));
          arm(self, delay);
        });
    return;
  }
  sleep_until_next(self);
}

/// Reads the rows, and from them each schedule's next tick.
void load(periodic_pointer self) {
  auto& st = self->state;
  st.busy = true;
  self->request(st.cfg.store, caf::infinite, periodic_atom::value)
    .then(
      [self](const std::vector<periodic_row>& rows) {
        auto& st = self->state;
        st.busy = false;
        st.retry.reset();
        auto t = now(self);
        for (auto& e : st.entries) {
          auto row = std::find_if(rows.begin(), rows.end(),
                                  [&](const periodic_row& r) {
                                    return r.name == e.config.name;
                                  });
          if (row == rows.end()) {
            e.next = e.schedule.next_after(t);
            continue;
          }
          if (row->spec != e.config.spec()) {
            spdlog::info("periodic '{}': the schedule changed (was \"{}\", now "
                         "\"{}\"): its ticks start afresh, with no catch-up",
                         printable(e.config.name), printable(row->spec),
                         printable(e.config.spec()));
            e.next = e.schedule.next_after(t);
            continue;
          }
          // The tick after the last one enqueued: past already when
          // ticks were missed (run_due then decides with catch_up).
          e.next = e.schedule.next_after(cron_time{std::chrono::seconds{row->last_tick}});
        }
        st.loaded = true;
        spdlog::info("periodic: {} schedule(s) loaded", st.entries.size());
        run_due(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        st.busy = false;
        auto delay = st.retry.next();
        spdlog::warn("periodic: reading the schedules failed ({}); trying "
                     "again in {}",
                     render(err), format_duration(delay));
        arm(self, delay);
      });
}

} // namespace

periodic_internal::behavior_type
periodic_behavior(periodic_pointer self, periodic_scheduler_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  for (auto& pc : st.cfg.schedules) {
    try {
      st.entries.push_back({pc, pc.schedule(), std::nullopt});
    } catch (const std::exception& e) {
      // The loader validated it: only a configuration built in code can
      // get here.
      spdlog::error("periodic '{}' ({}): {}; the schedule is ignored",
                    printable(pc.name), pc.where, e.what());
    }
  }
  self->send(self, load_atom::value);
  return {
    [self](load_atom) { run_due(self); },
    [self](tick_atom, uint64_t gen) {
      if (gen != self->state.generation)
        return; // replaced by a later timer
      run_due(self);
    },
  };
}

} // namespace aw
