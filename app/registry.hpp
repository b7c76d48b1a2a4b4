#pragma once
// Maps job kinds to handlers. A typed handler gets its args parsed from the
// job's JSON into a struct (nlohmann from_json); a raw handler gets the JSON.
// The registry turns every way a run can end into a job_outcome, so
// executors never see an exception.

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/transaction>

#include "actor_worker/messages/async.hpp"
#include "actor_worker/messages/event.hpp"
#include "actor_worker/messages/handler.hpp"
#include "actor_worker/messages/outcome.hpp"
#include "actor_worker/messages/job.hpp"
#include "actor_worker/messages/enqueue_request.hpp"
#include "actor_worker/messages/job_handlers.hpp"

namespace aw {

namespace storage {
class transaction_pool;
}

/// Handlers, hooks and follow-ups by job kind (see messages/job_handlers.hpp
/// for what the actors use).
class registry : public job_handlers {
public:
  /// A handler of raw JSON args.
  using raw_handler
    = std::function<outcome(const nlohmann::json& args, const job_context& ctx)>;

  /// An asynchronous handler of raw JSON args.
  using raw_async_handler = std::function<void(
    const nlohmann::json& args, const async_context& ctx, job_promise done)>;


  /// Registers `fn(const Args&, const job_context&)` for `kind`; it returns
  /// nothing (completed) or an aw::outcome. Args that do not parse into
  /// `Args` fail the job terminally, naming the kind and the parse error.
  /// `mode`: aw::non_blocking for a handler that never blocks (it then
  /// runs inline instead of on the blocking pool). Registering a kind twice
  /// replaces the handler.
  template <class Args, class F>
  registry& add(const std::string& kind, F fn,
                handler_mode mode = handler_mode::blocking) {
    return add_raw_handler(
      kind,
      [kind, fn = std::move(fn)](const nlohmann::json& json,
                                 const job_context& ctx) {
        return call(fn, parse_args<Args>(kind, json), ctx);
      },
      mode);
  }

  /// Registers `fn(const nlohmann::json&, const job_context&)` for `kind`,
  /// returning nothing (completed) or an aw::outcome.
  template <class F>
  registry& add_raw(const std::string& kind, F fn,
                    handler_mode mode = handler_mode::blocking) {
    return add_raw_handler(
      kind,
      [fn = std::move(fn)](const nlohmann::json& j, const job_context& ctx) {
        return call(fn, j, ctx);
      },
      mode);
  }

  // -- transactional handlers ---------------------------------------------------
  //
  // A transactional handler's writes and its job's outcome commit in one
  // transaction of the job's database, or neither does: the effect happens
  // exactly once per job, however often a crash makes the job run again.
  // The transaction is opened on a connection of the transactional pool
  // (database.transactional_pool_size), already holding the run's lease:
  // the job's row is locked, so no rescue, release or other run can finish
  // it meanwhile. The handler does its SQL in it and returns nothing
  // (completed) or an aw::outcome (retry_after, snooze, cancel,
  // wait_for_callback), which is written in the same transaction with its
  // durable follow-ups. Throwing rolls everything back, and the failure is
  // recorded the usual way. The transaction may stay open at most
  // database.transaction_timeout, less when the job's deadline or lease
  // leaves less. A run that is no longer this worker's rolls back and
  // records nothing (ec::stale_run). Do only this database's SQL in `tx`
  // and never commit it: the runtime does.

  /// Runs a transactional handler's part in the run's transaction and
  /// returns the run's outcome as recorded (job_outcome::record).
  using transaction_scope = std::function<job_outcome(
    const std::function<outcome(pqxx::work&)>& body)>;

  /// A transactional handler of raw JSON args: parses them, does what it
  /// does outside the transaction, then calls `in_tx` once with its
  /// transactional part and returns what that returned.
  using raw_transactional_handler = std::function<job_outcome(
    const nlohmann::json& args, const job_context& ctx,
    const transaction_scope& in_tx)>;

  /// Registers `fn(const Args&, const job_context&, pqxx::work&)` for
  /// `kind`, returning nothing (completed) or an aw::outcome.
  /// A run of such a kind holds no thread while it waits for its
  /// transaction (start_transactional).
  template <class Args, class F>
  registry& add_transactional(const std::string& kind, F fn) {
    auto shared = std::make_shared<F>(std::move(fn));
    return add_raw_transactional_part(
      kind, [kind, shared](const nlohmann::json& json, const job_context& ctx)
              -> std::function<outcome(pqxx::work&)> {
        return [args = parse_args<Args>(kind, json), &ctx,
                shared](pqxx::work& tx) { return call(*shared, args, ctx, tx); };
      });
  }

  /// Registers a transactional handler in two parts: `before(const Args&,
  /// const job_context&)` runs first, outside any transaction and holding
  /// no connection (slow external work: an API call, a file), then
  /// `fn(const Args&, const job_context&, R&, pqxx::work&)` in the
  /// transaction, with what `before` returned (R; without the R& when
  /// `before` returns void). Throwing from `before` fails the run as from
  /// a blocking handler, with no transaction opened.
  template <class Args, class Before, class F>
  registry& add_transactional(const std::string& kind, Before before, F fn) {
    return add_raw_transactional(
      kind, [kind, before = std::move(before),
             fn = std::move(fn)](const nlohmann::json& json,
                                 const job_context& ctx,
                                 const transaction_scope& in_tx) {
        auto args = parse_args<Args>(kind, json);
        using R = decltype(before(args, ctx));
        if constexpr (std::is_void_v<R>) {
          before(args, ctx);
          return in_tx(
            [&](pqxx::work& tx) { return call(fn, args, ctx, tx); });
        } else {
          R prepared = before(args, ctx);
          return in_tx([&](pqxx::work& tx) {
            return call(fn, args, ctx, prepared, tx);
          });
        }
      });
  }

  /// Registers a raw transactional handler for `kind`.
  registry& add_raw_transactional(const std::string& kind,
                                  raw_transactional_handler fn);

  /// A transactional handler that is all transactional part, of raw JSON
  /// args: parses them (outside the transaction; throwing fails the run
  /// as a blocking handler's throw does) and returns the part, which runs
  /// later in the run's transaction, on another thread. `ctx` outlives
  /// the part.
  using raw_transactional_part = std::function<std::function<outcome(pqxx::work&)>(
    const nlohmann::json& args, const job_context& ctx)>;

  /// Registers a transactional handler that is all transactional part for
  /// `kind` (start_transactional runs it; run_transactional too).
  registry& add_raw_transactional_part(const std::string& kind,
                                       raw_transactional_part part);

  /// Runs a transactional kind's handler to its end on the calling thread,
  /// its transaction on a connection of `pool` (the job's database), and
  /// returns the outcome: committed, stale, or (rolled back, or failed
  /// before its transaction) pending for storage to record. Another kind
  /// runs as run() runs it. Never throws.
  job_outcome run_transactional(const claimed_job& job,
                                const cancellation_token& cancel,
                                storage::transaction_pool& pool) const;

  /// Starts a run of a kind registered with its transactional part alone
  /// (add_transactional without `before`) without holding a thread: the
  /// run waits in `pool` for its transaction, its part runs on a thread
  /// `spawn` lends to the group that takes it, and `done` gets its outcome
  /// as run_transactional returns it (on that thread, or on the one that
  /// cancels the run). Args longer than defaults::inline_args_parse_limit
  /// are parsed on a thread `spawn` lends, the others on the calling
  /// thread. False, and nothing done, for any other kind.
  bool start_transactional(const claimed_job& job,
                           const cancellation_token& cancel,
                           storage::transaction_pool& pool,
                           std::function<void(std::function<void()>)> spawn,
                           std::function<void(job_outcome)> done) const;

  /// Registers a raw handler for `kind`.
  registry& add_raw_handler(const std::string& kind, raw_handler fn,
                            handler_mode mode = handler_mode::blocking);

  /// Registers an asynchronous handler `fn(const Args&, const
  /// async_context&, job_promise)` for `kind` (see app/async.hpp). It must
  /// not block; it completes the run through the promise, from any thread,
  /// now or later. Throwing before that fails the run as a synchronous
  /// handler's throw would.
  template <class Args, class F>
  registry& add_async(const std::string& kind, F fn) {
    return add_raw_async(kind, [kind, fn = std::move(fn)](
                                 const nlohmann::json& json,
                                 const async_context& ctx, job_promise done) {
      fn(parse_args<Args>(kind, json), ctx, std::move(done));
    });
  }

  /// Registers an asynchronous handler of raw JSON args for `kind`.
  registry& add_raw_async(const std::string& kind, raw_async_handler fn);

  /// True if `kind` has a handler.
  bool contains(const std::string& kind) const;

  /// The registered kinds, sorted.
  std::vector<std::string> kinds() const override;

  /// How `kind`'s handler runs.
  dispatch dispatch_of(const std::string& kind) const override;

  /// Runs the job's handler to its end on the calling thread and maps how
  /// it ended to an outcome (an asynchronous handler's timers then sleep on
  /// this thread). Never throws: an unknown kind and malformed args are
  /// terminal failures, a terminal_error is terminal, any other exception
  /// is retryable.
  job_outcome run(const claimed_job& job, const cancellation_token& cancel = {},
                  std::shared_ptr<run_callback> callback = nullptr) const override;

  /// Each run of `kind` registers its callback id before its handler
  /// starts, timing out `timeout` from then: the handler finds it in
  /// ctx.callback_id() (command kinds in AW_CALLBACK_ID, HTTP kinds in the
  /// X-AW-Callback-Id header; both in the job document's "callback_id").
  /// For kinds that must hand the id on but cannot wait for the database
  /// themselves: asynchronous ones. The registration is one round trip on
  /// a blocking thread before the start; a run whose registration fails
  /// fails as its handler would have. Throws std::invalid_argument for a
  /// timeout out of range.
  registry& register_callback_on_start(const std::string& kind,
                                       std::chrono::milliseconds timeout);

  /// The timeout `kind` registers its callback id with before each run.
  std::optional<std::chrono::milliseconds>
  callback_on_start(const std::string& kind) const override;

  /// Starts the job's asynchronous handler; `done` receives the outcome
  /// exactly once (possibly before start returns). Never throws.
  void start(const claimed_job& job, async_context ctx,
             job_promise::sink done) const override;

  /// What a run's callback registration keeps of `job`: its id, lease,
  /// kind and queue, not its args.
  static claimed_job identity_of(const claimed_job& job);

  /// The error a run's callback registration throws when the run no
  /// longer holds its job (ec::stale_run).
  static std::runtime_error stale_registration_error(const claimed_job& job);

  /// The error a typed handler throws when its args do not parse.
  static terminal_error malformed_args_error(const std::string& kind,
                                             const std::string& why);


  // -- lifecycle hooks ----------------------------------------------------------

  /// A hook of raw events.
  using hook = std::function<void(const event&)>;

  /// Registers `fn(const event&)` for every event of `kind`. Hooks of a kind
  /// stack and run in registration order, after the transition commits, on
  /// the hook dispatcher (never blocking executors). A throwing hook is
  /// logged and the next one still runs.
  registry& on_event_kind(const std::string& kind, hook fn);

  /// Registers `fn(const typed_event<Args>&)`: the same, with the job's args
  /// parsed into `Args` (a hook whose args do not parse is skipped, logged).
  template <class Args, class F>
  registry& on_event(const std::string& kind, F fn) {
    return on_event_kind(kind, [fn = std::move(fn)](const event& e) {
      typed_event<Args> te;
      static_cast<event&>(te) = e;
      te.args = e.job.at("args").get<Args>();
      fn(static_cast<const typed_event<Args>&>(te));
    });
  }

  /// Runs the hooks of `e.kind`; never throws. Returns how many threw.
  int run_hooks(const event& e) const override;

  // -- durable follow-up jobs ---------------------------------------------------
  //
  // A follow-up callable runs inside the transaction that records the
  // trigger's outcome (or its callback resolution), and the job it returns
  // is inserted in that same transaction: both commit or neither does. It
  // returns either a follow-up args struct with a `static constexpr const
  // char* kind` (inserted with default options), an enqueue_request (to set
  // queue, priority, max attempts, metadata, tags, unique, run at,
  // deadline, ordering key), or std::optional of either (nothing when
  // empty). Throwing rolls the transition back, except a dead-lettering's
  // (exhausted): that is recorded again without them, and they run after
  // its commit, best effort, as rescue follow-ups always do, in a
  // separate transaction after the rescue commits.

  /// `fn(const Args& args, const nlohmann::json& job)` when a job of `kind`
  /// completes.
  template <class Args, class F>
  registry& on_completed_enqueue(const std::string& kind, F fn) {
    return add_follow_up<Args>(kind, event_type::completed,
                               [fn](const Args& a, const event& e) {
                                 return fn(a, e.job);
                               });
  }

  /// `fn(args, job, reason)` when a job of `kind` is cancelled.
  template <class Args, class F>
  registry& on_cancelled_enqueue(const std::string& kind, F fn) {
    return add_follow_up<Args>(kind, event_type::cancelled,
                               [fn](const Args& a, const event& e) {
                                 return fn(a, e.job, e.message);
                               });
  }

  /// `fn(args, job, error, attempt, next_run_at)` when an attempt of a job
  /// of `kind` failed and it will run again (next_run_at as ISO text).
  /// `attempt` is the attempt that failed, as the retry limit counts
  /// (event::attempt): snoozes and releases do not count.
  template <class Args, class F>
  registry& on_retried_enqueue(const std::string& kind, F fn) {
    return add_follow_up<Args>(kind, event_type::retried,
                               [fn](const Args& a, const event& e) {
                                 return fn(a, e.job, e.message, e.attempt,
                                           e.job.value("run_at", std::string{}));
                               });
  }

  /// `fn(args, job, error, attempt)` when a job of `kind` is dead-lettered;
  /// `attempt` is the one that failed last (event::attempt).
  template <class Args, class F>
  registry& on_exhausted_enqueue(const std::string& kind, F fn) {
    return add_follow_up<Args>(kind, event_type::exhausted,
                               [fn](const Args& a, const event& e) {
                                 return fn(a, e.job, e.message, e.attempt);
                               });
  }

  /// `fn(args, job)` when a job of `kind` parks waiting for a callback
  /// (job["callback_id"] is set): the durable way to hand the id over.
  template <class Args, class F>
  registry& on_waiting_for_callback_enqueue(const std::string& kind, F fn) {
    return add_follow_up<Args>(kind, event_type::waiting_for_callback,
                               [fn](const Args& a, const event& e) {
                                 return fn(a, e.job);
                               });
  }

  /// `fn(args, job, reason)` when maintenance rescues a job of `kind`.
  template <class Args, class F>
  registry& on_rescued_enqueue(const std::string& kind, F fn) {
    return add_follow_up<Args>(kind, event_type::rescued,
                               [fn](const Args& a, const event& e) {
                                 return fn(a, e.job, e.reason);
                               });
  }

  /// The follow-up jobs of a committed transition. Throws when a callable
  /// throws (the caller rolls the transition back).
  std::vector<enqueue_request> follow_ups(const event& e) const override;

  /// Kinds with hooks or follow-ups.
  std::vector<std::string> observed_kinds() const override;

  /// True if `kind` has hooks.
  bool has_hooks(const std::string& kind) const override;


private:
  using follow_up_fn
    = std::function<std::optional<enqueue_request>(const event&)>;

  struct follow_up_spec {
    event_type type;
    follow_up_fn fn;
  };

  /// Turns what a follow-up callable returned into an enqueue request.
  template <class R>
  static std::optional<enqueue_request> to_request(R&& r) {
    using T = std::decay_t<R>;
    if constexpr (std::is_same_v<T, enqueue_request>) {
      return std::forward<R>(r);
    } else if constexpr (std::is_same_v<T, std::optional<enqueue_request>>) {
      return std::forward<R>(r);
    } else if constexpr (is_optional<T>::value) {
      if (!r)
        return std::nullopt;
      return to_request(*r);
    } else {
      enqueue_request req;
      req.kind = T::kind;
      req.args = nlohmann::json(r);
      return req;
    }
  }

  template <class T>
  struct is_optional : std::false_type {};
  template <class T>
  struct is_optional<std::optional<T>> : std::true_type {};

  template <class Args, class F>
  registry& add_follow_up(const std::string& kind, event_type type, F fn) {
    follow_ups_[kind].push_back(
      {type, [kind, fn = std::move(fn)](const event& e) {
         Args args;
         try {
           args = e.job.at("args").get<Args>();
         } catch (const std::exception& ex) {
           throw malformed_args_error(kind, ex.what());
         }
         return to_request(fn(static_cast<const Args&>(args), e));
       }});
    return *this;
  }


  template <class Args>
  static Args parse_args(const std::string& kind, const nlohmann::json& json) {
    try {
      return json.get<Args>();
    } catch (const std::exception& e) {
      throw malformed_args_error(kind, e.what());
    }
  }

  /// Calls `fn`; a handler that returns nothing completed its job.
  template <class F, class... Ts>
  static outcome call(F& fn, Ts&&... xs) {
    if constexpr (std::is_void_v<decltype(fn(std::forward<Ts>(xs)...))>) {
      fn(std::forward<Ts>(xs)...);
      return outcome::completed();
    } else {
      return fn(std::forward<Ts>(xs)...);
    }
  }

  struct handler_entry {
    raw_handler sync;
    raw_async_handler async;
    handler_mode mode = handler_mode::blocking;
    raw_transactional_handler transactional;
    /// The part alone, when the handler is nothing else.
    raw_transactional_part part;
  };

  std::unordered_map<std::string, handler_entry> handlers_;
  std::unordered_map<std::string, std::vector<hook>> hooks_;
  std::unordered_map<std::string, std::vector<follow_up_spec>> follow_ups_;
  /// register_callback_on_start's kinds and timeouts.
  std::unordered_map<std::string, std::chrono::milliseconds> callback_on_start_;
};

} // namespace aw
