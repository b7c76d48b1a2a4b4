#pragma once
// What a job handler sees and how it reports failure.
//
// A handler returns normally to complete its job, throws aw::terminal_error
// to send it straight to the dead letter queue, and throws anything else to
// fail the attempt retryably (rescheduled with backoff, dead-lettered on the
// last attempt). The exception's message becomes `last_error_message`.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/cancellation.hpp"

namespace aw {

/// The callback registration of one run (job_context::register_callback).
/// The runtime gives each run one, bound to the job's database and to the
/// run's lease; handlers use it through their job_context.
class run_callback {
public:
  /// Registers a callback id for the run, timing out `timeout` from now,
  /// and returns it; throws when it cannot (the run is no longer the job's:
  /// ec::stale_run's message; or the database failed).
  using registrar = std::function<std::string(std::chrono::milliseconds)>;

  /// A registration that registers through `fn`.
  explicit run_callback(registrar fn) : fn_(std::move(fn)) {
    // nop
  }

  /// The run's callback id: registered by the first call (one round trip
  /// to the database), the same id after that, its timeout unchanged.
  std::string register_for(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (id_.empty())
      id_ = fn_(timeout);
    return id_;
  }

  /// The id registered so far; empty before.
  std::string id() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return id_;
  }

private:
  mutable std::mutex mtx_;
  registrar fn_;
  std::string id_;
};

/// The job being run, as its handler sees it.
struct job_context {
  /// The job's id.
  int64_t id = 0;
  /// The job's kind.
  std::string kind;
  /// The job's queue.
  std::string queue;
  /// Times started, including this run (1 on the first run); snoozed and
  /// released runs count too. The attempt as the retry limit counts it is
  /// error_count + 1 (event::attempt).
  int attempt = 0;
  /// Failed attempts charged before this run.
  int error_count = 0;
  /// The job's metadata column as JSON text.
  std::string metadata;
  /// Cancelled when the run must stop: deadline exceeded, lease lost, or
  /// abandoned by the watchdog. Long handlers check it or sleep through it
  /// (`ctx.cancel.sleep_for(...)`); whatever they return after it fired
  /// is not recorded as a success.
  cancellation_token cancel;
  /// This run's callback registration (register_callback); set by the
  /// runtime, empty under registry::run (no database).
  std::shared_ptr<run_callback> callback;

  /// Registers this run's callback id now, before the handler returns
  /// outcome::wait_for_callback, so that it can hand the id to the system
  /// that will resolve it; returns the id (a UUID, unguessable). The
  /// callback times out `timeout` from now; that timeout stands when the
  /// run parks (the park's own timeout is then ignored). A resolution
  /// that arrives before the job parks is kept and applied as it parks; if
  /// the run ends any other way, the id is dropped. A second call returns
  /// the same id. Blocking: one round trip to the job's database (in a
  /// transactional handler's transaction, through that transaction: the
  /// id is valid once it commits). Throws std::invalid_argument for a
  /// timeout out of range, std::logic_error where the run must not wait
  /// for the database or has none (registry::run, non-blocking handlers,
  /// asynchronous ones: those register before they start, with
  /// registry::register_callback_on_start), and std::runtime_error when
  /// the run is no longer the job's or the database fails: thrown out of
  /// the handler, those fail the attempt as usual.
  std::string register_callback(
    std::chrono::milliseconds timeout = defaults::callback_timeout) const {
    if (timeout.count() <= 0 || timeout > defaults::max_duration)
      throw std::invalid_argument(
        "register_callback: the timeout must be positive and at most "
        "36,500 days, not " + std::to_string(timeout.count()) + " ms");
    if (!callback)
      throw std::logic_error(
        "register_callback: job kind '" + kind
        + "' runs where it must not wait for the database, or without one "
          "(a non-blocking or asynchronous handler, or registry::run): "
          "register from a blocking or transactional handler run by the "
          "runtime, or have an asynchronous kind's id registered before it "
          "starts (registry::register_callback_on_start)");
    return callback->register_for(timeout);
  }

  /// The callback id this run registered (register_callback, or before the
  /// run for a kind registered with registry::register_callback_on_start);
  /// empty if none.
  std::string callback_id() const {
    return callback ? callback->id() : std::string{};
  }
};

/// Thrown by a handler: the job failed for good and must not be retried.
struct terminal_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where a synchronous handler runs.
enum class handler_mode : uint8_t {
  /// It may block (I/O, sleeps, locks, long computations): it runs on the
  /// runtime's bounded pool of blocking threads. The default, and always
  /// safe.
  blocking,
  /// It never blocks and returns within microseconds: it runs inline on
  /// the executor's CAF thread, saving the hand-off to another thread that
  /// would cost more than the handler. A handler that blocks here stalls
  /// the actors that share the thread: when in doubt, leave it blocking.
  non_blocking,
};

/// Tag for registry::add: the handler never blocks (handler_mode).
inline constexpr handler_mode non_blocking = handler_mode::non_blocking;

} // namespace aw
