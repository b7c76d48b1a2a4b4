#include "actor_worker/app/registry.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "actor_worker/config/defaults.hpp"
#include "actor_worker/messages/printable.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/transaction_pool.hpp"

namespace aw {

namespace {

/// The job's args as JSON, or (`failure`) the terminal failure of args
/// that do not parse.
bool parse_job_args(const claimed_job& job, nlohmann::json& args,
                    job_outcome& failure) {
  try {
    args = nlohmann::json::parse(job.args);
    return true;
  } catch (const std::exception& e) {
    failure = failure_of(job.id, outcome_kind::terminal_failure,
                         registry::malformed_args_error(job.kind, e.what())
                           .what());
    return false;
  }
}

/// What the handler of `job` sees of it.
job_context context_of(const claimed_job& job,
                       const cancellation_token& cancel,
                       std::shared_ptr<run_callback> callback = nullptr) {
  return job_context{job.id,          job.kind,     job.queue, job.attempt,
                     job.error_count, job.metadata, cancel,
                     std::move(callback)};
}


} // namespace

registry& registry::add_raw_handler(const std::string& kind, raw_handler fn,
                                    handler_mode mode) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  handlers_[kind] = handler_entry{std::move(fn), nullptr, mode, nullptr, nullptr};
  return *this;
}

registry& registry::add_raw_async(const std::string& kind,
                                  raw_async_handler fn) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  handlers_[kind] = handler_entry{nullptr, std::move(fn),
                                  handler_mode::non_blocking, nullptr, nullptr};
  return *this;
}

registry& registry::add_raw_transactional(const std::string& kind,
                                          raw_transactional_handler fn) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  handler_entry e;
  e.transactional = std::move(fn);
  handlers_[kind] = std::move(e);
  return *this;
}

registry& registry::add_raw_transactional_part(const std::string& kind,
                                               raw_transactional_part part) {
  add_raw_transactional(
    kind, [part](const nlohmann::json& args, const job_context& ctx,
                 const transaction_scope& in_tx) {
      return in_tx(part(args, ctx));
    });
  handlers_[kind].part = std::move(part);
  return *this;
}

bool registry::contains(const std::string& kind) const {
  return handlers_.count(kind) > 0;
}

std::vector<std::string> registry::kinds() const {
  std::vector<std::string> out;
  for (auto& [kind, fn] : handlers_)
    out.push_back(kind);
  std::sort(out.begin(), out.end());
  return out;
}

registry::dispatch registry::dispatch_of(const std::string& kind) const {
  auto i = handlers_.find(kind);
  if (i == handlers_.end())
    return dispatch::inline_sync; // fails at once, without a thread
  if (i->second.async)
    return dispatch::async;
  if (i->second.transactional)
    return dispatch::transactional;
  return i->second.mode == handler_mode::non_blocking ? dispatch::inline_sync
                                                      : dispatch::blocking;
}

terminal_error registry::malformed_args_error(const std::string& kind,
                                              const std::string& why) {
  return terminal_error("malformed args for job kind '" + kind + "': " + why);
}


registry& registry::register_callback_on_start(const std::string& kind,
                                               std::chrono::milliseconds timeout) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  if (timeout.count() <= 0 || timeout > defaults::max_duration)
    throw std::invalid_argument(
      "register_callback_on_start: kind '" + kind
      + "': the timeout must be positive and at most 36,500 days, not "
      + std::to_string(timeout.count()) + " ms");
  callback_on_start_[kind] = timeout;
  return *this;
}

std::optional<std::chrono::milliseconds>
registry::callback_on_start(const std::string& kind) const {
  auto i = callback_on_start_.find(kind);
  if (i == callback_on_start_.end())
    return std::nullopt;
  return i->second;
}

claimed_job registry::identity_of(const claimed_job& job) {
  claimed_job out;
  out.id = job.id;
  out.lease = job.lease;
  out.kind = job.kind;
  out.queue = job.queue;
  return out;
}

std::runtime_error registry::stale_registration_error(const claimed_job& job) {
  return std::runtime_error(
    "register_callback: job " + std::to_string(job.id) + " (kind '" + job.kind
    + "') is no longer this run's (released, rescued or claimed again): its "
      "callback id was not registered (stale_run)");
}

job_outcome registry::run(const claimed_job& job,
                          const cancellation_token& cancel,
                          std::shared_ptr<run_callback> callback) const {
  auto i = handlers_.find(job.kind);
  if (i == handlers_.end())
    return failure_of(job.id, outcome_kind::terminal_failure,
                      "unknown job kind '" + job.kind
                        + "': no handler is registered for it on this worker");
  if (i->second.transactional)
    return failure_of(job.id, outcome_kind::terminal_failure,
                      "job kind '" + job.kind
                        + "' has a transactional handler, which runs only "
                          "in a worker's runtime (it needs the job's "
                          "database): registry::run cannot run it");
  if (!i->second.sync) {
    // An asynchronous kind, run to its end on this thread (tests, one-off
    // runs; the runtime starts these without a thread): its timers sleep
    // here, and the run waits for its promise.
    std::mutex mtx;
    std::condition_variable cv;
    std::optional<job_outcome> result;
    async_context ctx;
    ctx.cancel = cancel;
    ctx.callback = std::move(callback);
    ctx.timer = [cancel](std::chrono::milliseconds delay,
                         std::function<void()> fn) {
      if (cancel.sleep_for(delay))
        fn();
    };
    start(job, std::move(ctx), [&](job_outcome out) {
      std::lock_guard<std::mutex> guard{mtx};
      result = std::move(out);
      cv.notify_all();
    });
    std::unique_lock<std::mutex> guard{mtx};
    cv.wait(guard, [&] { return result.has_value(); });
    return std::move(*result);
  }
  nlohmann::json args;
  job_outcome failure;
  if (!parse_job_args(job, args, failure))
    return failure;
  auto ctx = context_of(job, cancel, std::move(callback));
  try {
    return outcome_of(job.id, job.kind, i->second.sync(args, ctx));
  } catch (...) {
    return outcome_of_exception(job.id, job.kind, std::current_exception());
  }
}

namespace {

/// The run as the transactional pool records it.
job_outcome transactional_run_of(const claimed_job& job) {
  job_outcome run;
  run.job_id = job.id;
  run.lease = job.lease;
  run.attempt = job.attempt;
  run.observed = !job.started_row.empty();
  run.job_kind = job.kind;
  run.queue = job.queue;
  return run;
}

/// A transactional run's context: it registers its callback id through
/// its transaction while the transactional part runs (the id is valid
/// once that commits; another connection would wait for the row the
/// transaction holds), through a connection of `pool` before. `open_tx`:
/// the transaction while the part runs.
job_context transactional_context_of(const claimed_job& job,
                                     const cancellation_token& cancel,
                                     storage::transaction_pool& pool,
                                     std::shared_ptr<pqxx::work*> open_tx) {
  return context_of(
    job, cancel,
    std::make_shared<run_callback>([&pool, open_tx, cancel,
                                    job = registry::identity_of(job)](
                                     std::chrono::milliseconds timeout) {
      // (The pool outlives every run: the runtime owns both.)
      auto id = *open_tx != nullptr
                  ? storage::register_running_callback(
                      **open_tx, pool.worker_id(), job.id, job.lease, timeout)
                  : pool.register_callback(job.id, job.lease, timeout, cancel);
      if (!id)
        throw registry::stale_registration_error(job);
      return *id;
    }));
}

/// `part` as the pool runs it in the run's transaction: with `open_tx`
/// set while it runs, its outcome mapped and timed from `started`.
storage::transactional_body
in_transaction(int64_t job_id, std::string kind,
               std::chrono::steady_clock::time_point started,
               std::shared_ptr<pqxx::work*> open_tx,
               std::function<outcome(pqxx::work&)> part) {
  return [job_id, kind = std::move(kind), started, open_tx = std::move(open_tx),
          part = std::move(part)](pqxx::work& tx) {
    struct in_scope {
      std::shared_ptr<pqxx::work*> slot;
      ~in_scope() {
        *slot = nullptr;
      }
    } scope{open_tx};
    *open_tx = &tx;
    auto out = outcome_of(job_id, kind, part(tx));
    // An outcome the handler could not ask for (a negative delay) is a
    // failure: its writes go.
    if (out.kind == outcome_kind::terminal_failure)
      throw terminal_error(out.message);
    out.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    return out;
  };
}

} // namespace

job_outcome registry::run_transactional(const claimed_job& job,
                                        const cancellation_token& cancel,
                                        storage::transaction_pool& pool) const {
  auto i = handlers_.find(job.kind);
  if (i == handlers_.end() || !i->second.transactional)
    return run(job, cancel);
  auto started = std::chrono::steady_clock::now();
  nlohmann::json args;
  job_outcome failure;
  if (!parse_job_args(job, args, failure))
    return failure;
  auto open_tx = std::make_shared<pqxx::work*>(nullptr);
  auto ctx = transactional_context_of(job, cancel, pool, open_tx);
  auto run = transactional_run_of(job);
  transaction_scope in_tx = [&](const std::function<outcome(pqxx::work&)>& body) {
    return pool.transact(run, job.deadline_ms, started, cancel,
                         in_transaction(job.id, job.kind, started, open_tx, body));
  };
  try {
    return i->second.transactional(args, ctx, in_tx);
  } catch (...) {
    return outcome_of_exception(job.id, job.kind, std::current_exception());
  }
}

namespace {

/// start_transactional's work once the args may be parsed on this thread:
/// parses them, prepares `part`, and queues the run in `pool`.
void submit_transactional(const claimed_job& job, const cancellation_token& cancel,
                          storage::transaction_pool& pool,
                          const registry::raw_transactional_part& part,
                          std::function<void(std::function<void()>)> spawn,
                          std::function<void(job_outcome)> done,
                          std::chrono::steady_clock::time_point started) {
  nlohmann::json args;
  job_outcome failure;
  if (!parse_job_args(job, args, failure)) {
    done(std::move(failure));
    return;
  }
  // What the part refers to (its args, its context) lives as long as the
  // body the pool holds.
  struct held {
    nlohmann::json args;
    job_context ctx;
    std::function<outcome(pqxx::work&)> part;
  };
  auto open_tx = std::make_shared<pqxx::work*>(nullptr);
  auto h = std::make_shared<held>();
  h->args = std::move(args);
  h->ctx = transactional_context_of(job, cancel, pool, open_tx);
  try {
    h->part = part(h->args, h->ctx);
  } catch (...) {
    done(outcome_of_exception(job.id, job.kind, std::current_exception()));
    return;
  }
  auto body = in_transaction(job.id, job.kind, started, open_tx,
                             [h](pqxx::work& tx) { return h->part(tx); });
  pool.submit(transactional_run_of(job), job.deadline_ms, started, cancel,
              std::move(body),
              [done = std::move(done), id = job.id,
               kind = job.kind](job_outcome out, std::exception_ptr error) {
                done(error ? outcome_of_exception(id, kind, error) : std::move(out));
              },
              std::move(spawn));
}

} // namespace

bool registry::start_transactional(const claimed_job& job,
                                   const cancellation_token& cancel,
                                   storage::transaction_pool& pool,
                                   std::function<void(std::function<void()>)> spawn,
                                   std::function<void(job_outcome)> done) const {
  auto i = handlers_.find(job.kind);
  if (i == handlers_.end() || !i->second.part)
    return false;
  auto started = std::chrono::steady_clock::now();
  if (job.args.size() <= defaults::inline_args_parse_limit) {
    submit_transactional(job, cancel, pool, i->second.part, std::move(spawn),
                         std::move(done), started);
    return true;
  }
  // Parsing large args would hold the executor's scheduler thread (a
  // blocking handler parses on its own thread): they are parsed on a
  // thread of the spawner, a hand-off small ones do without.
  auto lend = spawn;
  lend([&pool, part = i->second.part, job, cancel, spawn = std::move(spawn),
        done = std::move(done), started]() mutable {
    submit_transactional(job, cancel, pool, part, std::move(spawn),
                         std::move(done), started);
  });
  return true;
}

void registry::start(const claimed_job& job, async_context ctx,
                     job_promise::sink done) const {
  auto i = handlers_.find(job.kind);
  if (i == handlers_.end() || !i->second.async) {
    // Not an asynchronous kind: run it to its end here.
    done(run(job, ctx.cancel));
    return;
  }
  job_promise promise{job.id, job.kind, std::move(done)};
  nlohmann::json args;
  try {
    args = nlohmann::json::parse(job.args);
  } catch (const std::exception& e) {
    promise.fail_terminal(malformed_args_error(job.kind, e.what()).what());
    return;
  }
  static_cast<job_context&>(ctx) = job_context{
    job.id, job.kind, job.queue, job.attempt, job.error_count, job.metadata,
    ctx.cancel, ctx.callback};
  try {
    i->second.async(args, ctx, promise);
  } catch (...) {
    promise.fail(std::current_exception());
  }
}

registry& registry::on_event_kind(const std::string& kind, hook fn) {
  if (kind.empty())
    throw std::invalid_argument("registry: a job kind must not be empty");
  hooks_[kind].push_back(std::move(fn));
  return *this;
}

int registry::run_hooks(const event& e) const {
  auto i = hooks_.find(e.kind);
  if (i == hooks_.end())
    return 0;
  size_t n = 0;
  int failures = 0;
  for (auto& fn : i->second) {
    ++n;
    try {
      fn(e);
    } catch (const std::exception& ex) {
      ++failures;
      spdlog::error("hook #{} of kind '{}' threw on {} of job {}: {}", n,
                    printable(e.kind), to_string(e.type), e.job_id(),
                    printable(ex.what()));
    } catch (...) {
      ++failures;
      spdlog::error("hook #{} of kind '{}' threw a non-standard exception on "
                    "{} of job {}",
                    n, printable(e.kind), to_string(e.type), e.job_id());
    }
  }
  return failures;
}

std::vector<enqueue_request> registry::follow_ups(const event& e) const {
  std::vector<enqueue_request> out;
  auto i = follow_ups_.find(e.kind);
  if (i == follow_ups_.end())
    return out;
  for (auto& spec : i->second)
    if (spec.type == e.type)
      if (auto req = spec.fn(e))
        out.push_back(std::move(*req));
  return out;
}

std::vector<std::string> registry::observed_kinds() const {
  std::set<std::string> kinds;
  for (auto& [kind, hs] : hooks_)
    kinds.insert(kind);
  for (auto& [kind, fs] : follow_ups_)
    kinds.insert(kind);
  return {kinds.begin(), kinds.end()};
}

bool registry::has_hooks(const std::string& kind) const {
  return hooks_.count(kind) > 0;
}

} // namespace aw
