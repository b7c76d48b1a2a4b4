#pragma once
// What the actors need from the application's handlers, hooks and durable
// follow-ups: run a job, fire the hooks of a committed transition, and
// compute the follow-up jobs of one. aw::registry implements it; the actors
// depend on this interface only, so the runtime layer sits above them.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actor_worker/messages/async.hpp"
#include "actor_worker/messages/cancellation.hpp"
#include "actor_worker/messages/enqueue_request.hpp"
#include "actor_worker/messages/event.hpp"
#include "actor_worker/messages/handler.hpp"
#include "actor_worker/messages/job.hpp"

namespace aw {

/// What the actors need from a registry of handlers, hooks and follow-ups by kind (aw::registry implements it): the layers below app/ see only this.
class job_handlers {
public:
  /// How the runtime runs a kind's handler.
  enum class dispatch : uint8_t {
    /// On the blocking pool.
    blocking,
    /// Inline on the executor's thread, to its end (non-blocking handlers,
    /// and kinds without a handler, which fail at once).
    inline_sync,
    /// Started inline; completes through its job_promise.
    async,
    /// On the blocking pool, its SQL and the job's outcome in one
    /// transaction of the job's database (app/registry.hpp,
    /// add_transactional).
    transactional,
  };

  virtual ~job_handlers() = default;

  /// How `kind`'s handler runs.
  virtual dispatch dispatch_of(const std::string& kind) const = 0;

  /// Runs the job's handler to its end on the calling thread and maps how
  /// it ended to an outcome. Never throws: an unknown kind and malformed
  /// args are terminal failures, a terminal_error is terminal, any other
  /// exception is retryable. `callback`: the run's callback registration
  /// (job_context::register_callback); none where there is no database.
  virtual job_outcome run(const claimed_job& job,
                          const cancellation_token& cancel = {},
                          std::shared_ptr<run_callback> callback = nullptr) const
    = 0;

  /// The timeout of the callback id each run of `kind` registers before
  /// its handler starts (registry::register_callback_on_start); nothing
  /// for kinds that do not.
  virtual std::optional<std::chrono::milliseconds>
  callback_on_start(const std::string& kind) const = 0;

  /// Starts the job's asynchronous handler; `done` receives the outcome
  /// exactly once (possibly before start returns). Never throws.
  virtual void start(const claimed_job& job, async_context ctx,
                     job_promise::sink done) const
    = 0;

  /// True if `kind` has hooks.
  virtual bool has_hooks(const std::string& kind) const = 0;

  /// Runs the hooks of `e.kind`; never throws. Returns how many of them
  /// threw (each is logged).
  virtual int run_hooks(const event& e) const = 0;

  /// The kinds it can run: a worker claims only jobs of these (others wait
  /// for a worker that runs them).
  virtual std::vector<std::string> kinds() const = 0;

  /// Kinds with hooks or follow-ups: their transitions are read back as
  /// events.
  virtual std::vector<std::string> observed_kinds() const = 0;

  /// The follow-up jobs of a committed transition. Throws when a callable
  /// throws (the caller rolls the transition back).
  virtual std::vector<enqueue_request> follow_ups(const event& e) const = 0;
};

} // namespace aw
