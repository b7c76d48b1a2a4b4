#pragma once
// Shared by the suites of outcomes, callbacks, follow-ups and hooks: a
// thread-safe log of the events hooks saw, a scripted handler whose outcome
// per attempt comes from the job's args, and enqueue shortcuts. Include
// after worker_node.hpp (CAF headers are slow; only suites that run nodes
// include this).

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "actor_worker/messages/event.hpp"
#include "actor_worker/messages/handler.hpp"
#include "actor_worker/messages/outcome.hpp"
#include "actor_worker/app/registry.hpp"
#include "pg_fixture.hpp"
#include "actor_worker/storage/enqueue.hpp"

namespace aw::test {

/// What a hook saw of one event (a copy: the event does not outlive the
/// hook call).
struct seen_event {
  aw::event_type type = aw::event_type::started;
  std::string kind;
  int64_t job_id = 0;
  nlohmann::json job;
  std::chrono::milliseconds duration{0};
  std::string message;
  aw::rescue_reason reason = aw::rescue_reason::stale_heartbeat;
  /// event::attempt: as the retry limit counts.
  int attempt = 0;
};

/// Events collected by hooks running on the hook dispatcher thread, read by
/// the test thread.
class event_log {
public:
  /// A hook that records every event it is given.
  aw::registry::hook hook() {
    return [this](const aw::event& e) { add(e); };
  }

  void add(const aw::event& e) {
    seen_event s;
    s.type = e.type;
    s.kind = e.kind;
    s.job_id = e.job_id();
    s.job = e.job;
    s.duration = e.duration;
    s.attempt = e.attempt;
    s.message = e.message;
    s.reason = e.reason;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      events_.push_back(std::move(s));
    }
    cv_.notify_all();
  }

  std::vector<seen_event> all() {
    std::lock_guard<std::mutex> guard{mtx_};
    return events_;
  }

  /// The events of `job_id`, in arrival order.
  std::vector<seen_event> of(int64_t job_id) {
    std::lock_guard<std::mutex> guard{mtx_};
    std::vector<seen_event> out;
    for (auto& e : events_)
      if (e.job_id == job_id)
        out.push_back(e);
    return out;
  }

  /// The events of `job_id` of type `t`, in arrival order.
  std::vector<seen_event> of(int64_t job_id, aw::event_type t) {
    std::lock_guard<std::mutex> guard{mtx_};
    std::vector<seen_event> out;
    for (auto& e : events_)
      if (e.job_id == job_id && e.type == t)
        out.push_back(e);
    return out;
  }

  size_t count(int64_t job_id, aw::event_type t) {
    return of(job_id, t).size();
  }

  size_t count(aw::event_type t) {
    std::lock_guard<std::mutex> guard{mtx_};
    return static_cast<size_t>(std::count_if(
      events_.begin(), events_.end(), [t](auto& e) { return e.type == t; }));
  }

  size_t size() {
    std::lock_guard<std::mutex> guard{mtx_};
    return events_.size();
  }

  /// Waits until `job_id` has at least `n` events of type `t`.
  bool wait_for(int64_t job_id, aw::event_type t, size_t n,
                std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, timeout, [&] {
      return static_cast<size_t>(std::count_if(
               events_.begin(), events_.end(),
               [&](auto& e) { return e.job_id == job_id && e.type == t; }))
             >= n;
    });
  }

  /// Waits until there are at least `n` events of type `t` (any job).
  bool wait_for_total(aw::event_type t, size_t n,
                      std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_for(guard, timeout, [&] {
      return static_cast<size_t>(std::count_if(
               events_.begin(), events_.end(),
               [&](auto& e) { return e.type == t; }))
             >= n;
    });
  }

private:
  std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<seen_event> events_;
};

/// The outcome of attempt `ctx.attempt` as the job's args script it:
/// `{"steps": [{"op": "...", "ms": N, "message": "...", "sleep_ms": N}, ...]}`,
/// step attempt-1 (the last one for later attempts). Ops: complete,
/// retry_after, snooze, cancel, wait, throw, terminal.
inline aw::outcome scripted(const nlohmann::json& args,
                            const aw::job_context& ctx) {
  auto steps = args.value("steps", nlohmann::json::array());
  if (steps.empty())
    return aw::outcome::completed();
  auto i = std::min(static_cast<size_t>(std::max(ctx.attempt, 1) - 1),
                    steps.size() - 1);
  const auto& step = steps[i];
  if (auto sleep = step.value("sleep_ms", 0); sleep > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds{sleep});
  auto op = step.value("op", std::string{"complete"});
  std::chrono::milliseconds ms{step.value("ms", int64_t{0})};
  auto message = step.value("message", std::string{});
  if (op == "complete")
    return aw::outcome::completed();
  if (op == "retry_after")
    return message.empty() ? aw::outcome::retry_after(ms)
                           : aw::outcome::retry_after(ms, message);
  if (op == "snooze")
    return aw::outcome::snooze(ms);
  if (op == "cancel")
    return aw::outcome::cancel(message);
  if (op == "wait")
    return aw::outcome::wait_for_callback(ms);
  if (op == "throw")
    throw std::runtime_error(message);
  if (op == "terminal")
    throw aw::terminal_error(message);
  throw aw::terminal_error("scripted: unknown op '" + op + "'");
}

/// One step of a script.
inline nlohmann::json step(const std::string& op, int64_t ms = 0,
                           const std::string& message = {}) {
  nlohmann::json s = {{"op", op}, {"ms", ms}};
  if (!message.empty())
    s["message"] = message;
  return s;
}

/// Args of a scripted job.
inline nlohmann::json script(std::vector<nlohmann::json> steps) {
  return {{"steps", std::move(steps)}};
}

/// Enqueues one job in a transaction of its own; returns its id.
inline int64_t enqueue_one(const fresh_database& db, const std::string& kind,
                           const nlohmann::json& args = nlohmann::json::object(),
                           const aw::insert_options& opts = {}) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto id = aw::enqueue(tx, kind, args, opts);
  tx.commit();
  return id;
}

/// Enqueues many jobs in one transaction; returns their ids.
inline std::vector<int64_t>
enqueue_all(const fresh_database& db,
            const std::vector<aw::enqueue_request>& requests) {
  auto conn = db.connect();
  pqxx::work tx{*conn};
  auto ids = aw::enqueue_many(tx, requests);
  tx.commit();
  return ids;
}

/// " FROM jobs_live WHERE id = N"
inline std::string job_where(int64_t id) {
  return " FROM jobs_live WHERE id = " + std::to_string(id);
}

/// " FROM dead_letter_jobs WHERE original_job_id = N"
inline std::string dead_where(int64_t id) {
  return " FROM dead_letter_jobs WHERE original_job_id = " + std::to_string(id);
}

inline bool is_uuid(const std::string& s) {
  static const std::regex re{
    "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"};
  return std::regex_match(s, re);
}

/// A JSON string field of an event's row ("" when absent or null).
inline std::string field(const nlohmann::json& row, const std::string& key) {
  auto i = row.find(key);
  if (i == row.end() || i->is_null())
    return {};
  return i->is_string() ? i->get<std::string>() : i->dump();
}

} // namespace aw::test
