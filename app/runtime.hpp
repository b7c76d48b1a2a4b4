#pragma once
// The embedding API: run a worker node inside an application's own
// caf::actor_system.
//
//   aw::registry reg;
//   reg.add<send_email>("send_email", [](const send_email& a, const aw::job_context&) { ... });
//   aw::runtime rt{sys, cfg, std::make_shared<aw::registry>(std::move(reg))};
//   ...                  // jobs run
//   rt.stop();           // graceful: drain, release, flush
//
// Enqueue with aw::enqueue() (storage/enqueue.hpp) in the application's
// own pqxx transaction.

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/error.hpp>

#include <nlohmann/json.hpp>

#include "actor_worker/config/config.hpp"
#include "actor_worker/config/defaults.hpp"
#include "actor_worker/storage/callbacks.hpp"
#include "actor_worker/storage/enqueue.hpp"
#include "actor_worker/storage/migrations.hpp"

namespace pqxx {
class connection_base;
}

namespace aw {

class registry;
class registry_runner;

/// Applies the schema migrations this library carries, as `actor-worker
/// migrate` does: one transaction under an advisory lock, so concurrent
/// calls converge and a re-run is a no-op. Throws config_error for an empty
/// database URL, storage::schema_error when the database is newer than the
/// library, and pqxx's errors when it cannot be reached.
storage::migrate_report migrate(const runtime_config& cfg);

/// What migrate_all() did to one database.
struct database_migrate_report {
  /// "default" ([database]) or the [databases.NAME] name.
  std::string database;
  /// What migrating it did.
  storage::migrate_report report;
};

/// Migrates every database the configuration names: [database] first,
/// then each [databases.NAME], each as migrate() does. Stops at the first
/// that fails (the ones before it stay migrated; a re-run is a no-op for
/// them) and rethrows its error; `on_done`, when given, is told of each
/// database once it is migrated.
std::vector<database_migrate_report>
migrate_all(const runtime_config& cfg,
            const std::function<void(const database_migrate_report&)>& on_done
            = nullptr);

/// Applies the [scheduler] settings (threads, policy) to the configuration
/// of the actor system a node will run in. The binary does this; an
/// application embedding the runtime calls it on its own config before it
/// creates its caf::actor_system, or tunes CAF itself.
void configure_actor_system(caf::actor_system_config& sys_cfg,
                            const scheduler_config& sched);

/// What a callback resolution applied and committed.
struct callback_outcome {
  /// The action applied: the one asked for (resolve_callback's default).
  storage::callback_action action = storage::callback_action::complete;
  /// The committed row: the job as the `jobs` view shows it, or for `fail`
  /// its row in `dead_letter_jobs`.
  nlohmann::json row;
  /// The job still runs: it registered its callback id while running
  /// (job_context::register_callback) and has not parked yet. The
  /// resolution is kept and applied, with its event and follow-ups, when
  /// that run parks the job; if the run ends any other way it is dropped.
  /// Nothing fired yet; `row` is the running job's.
  bool kept = false;
};

/// What runtime::stop() did.
struct stop_report {
  /// Jobs released without charging an attempt: claimed but not started,
  /// or still running when the drain budget ran out.
  int64_t released = 0;
  /// Handlers still running when stop() returned (they ignored their
  /// cancellation past the drain and the wait). They run on to their end
  /// on detached threads, but can no longer reach the actor system: their
  /// results are dropped, so the system may be destroyed.
  int64_t abandoned = 0;
};

class idle_poll_gate;
class http_endpoint;
class prometheus_observer;

/// A worker node inside an application's own caf::actor_system: its actors claim, run and record the jobs of the configured queues until stop().
class runtime {
public:
  /// Starts a node: storage, schema check, pollers, listener, maintenance,
  /// and with [http] listen set the HTTP endpoint (/healthz, /readyz,
  /// /metrics: app/http_endpoint.hpp; the dashboard: app/dashboard.hpp).
  /// Returns at once; a database that is down only delays the start.
  /// Throws config_error for an invalid configuration (an empty database
  /// URL, or [http] token_env naming an unset variable, included),
  /// std::runtime_error when http.listen cannot be bound. `gate`: an idle poll gate shared
  /// with other runtimes (app/idle_poll_gate.hpp), replacing
  /// worker.idle_poll_permits; the runtime keeps it alive.
  runtime(caf::actor_system& sys, runtime_config cfg,
          std::shared_ptr<const registry> reg,
          std::shared_ptr<idle_poll_gate> gate = nullptr);

  /// Stops gracefully if still running.
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// The value this node writes to jobs.locked_by.
  const std::string& worker_id() const {
    return worker_id_;
  }

  /// Graceful shutdown: stop claiming, drain running jobs for the
  /// configured budget (worker.shutdown_drain), release the rest without
  /// charging an attempt, then wait up to `handler_wait` for handlers that
  /// ignored their cancellation. When it returns no handler can touch the
  /// actor system any more. Blocks until done. Idempotent (a second call
  /// returns the first report).
  stop_report stop(std::chrono::milliseconds handler_wait
                   = defaults::stop_handler_wait);

  /// Blocks until the node ended (stopped, or a fatal error such as an
  /// out-of-date schema). Returns the error, or a default error when it
  /// stopped cleanly.
  caf::error wait();

  /// wait() with a timeout: nothing when still running.
  std::optional<caf::error> wait_for(std::chrono::milliseconds timeout);

  /// Wakes the pollers of `queue` (empty = all), e.g. after enqueueing from
  /// this process on a connection whose NOTIFY may arrive late.
  void wake(const std::string& queue = {});

  // -- enqueue, routed by queue --------------------------------------------
  //
  // With queues sharded across databases ([databases.NAME], [queues.Q]
  // database), a job must be inserted in its queue's database. To enqueue
  // in the application's own transaction, open it on database_for(queue)
  // and call aw::enqueue (storage/enqueue.hpp); or let the runtime do it in
  // a transaction of its own with enqueue() / enqueue_many() below.

  /// The database `queue`'s jobs live in (its url, pooler, ...).
  const database_config& database_for(const std::string& queue) const;

  /// Inserts one job in its queue's database (opts.queue), in a
  /// transaction of its own on a connection the runtime keeps per
  /// database, and returns its id. Throws std::invalid_argument as
  /// aw::enqueue does, pqxx's errors when the database cannot be reached.
  int64_t enqueue(const std::string& kind, const nlohmann::json& args,
                  const insert_options& opts = {});

  /// Inserts jobs in one transaction and returns their ids in order, as
  /// aw::enqueue_many (COPY for many plain jobs). Every job's queue must
  /// live in one database (a transaction cannot span two): throws
  /// std::invalid_argument naming the queues otherwise.
  std::vector<int64_t> enqueue_many(const std::vector<enqueue_request>& jobs);

  /// A worker id for `node`: "node:pid:random" (unique per process start).
  static std::string make_worker_id(const std::string& node);

  // -- external callbacks ------------------------------------------------------
  //
  // Each resolves the job parked under `callback_id` in one transaction
  // with its follow-ups (both commit or neither does), then fires the hooks
  // in this process, and returns what it applied with the committed row. An
  // unknown id, a job no longer waiting, or a follow-up that fails throws
  // storage::callback_error (code(): callback_not_found,
  // callback_not_waiting, follow_up_failed) and changes nothing: the
  // external sender can retry. Database errors throw pqxx exceptions. A
  // job that registered its id while running and has not parked yet keeps
  // the resolution for its park (callback_outcome::kept); a second one
  // before then is refused (callback_not_waiting).

  /// Completes the job (event `completed`, zero duration); the payload is
  /// stored in callback_result.
  callback_outcome complete_external(const std::string& callback_id,
                                     const nlohmann::json& payload = nullptr);

  /// Fails the job for good: dead-lettered (event `exhausted`); the
  /// outcome's row is the dead letter.
  callback_outcome fail_external(const std::string& callback_id,
                                 const std::string& error);

  /// Makes the job available again at once (event `retried`); not charged.
  callback_outcome retry_external(const std::string& callback_id,
                                  const nlohmann::json& payload = nullptr);

  /// Resumes the job: available again at once, not charged, the payload in
  /// callback_result, and no event of its own; its next run fires `started`
  /// and its outcome as usual.
  callback_outcome resume_external(const std::string& callback_id,
                                   const nlohmann::json& payload = nullptr);

  /// Stores `payload` and applies `default_action` ("complete", "fail",
  /// "retry" or "resume"; anything else throws std::invalid_argument and
  /// changes nothing); for "fail" the payload's "error" field, if any, is
  /// the message. Returns the outcome applied.
  callback_outcome resolve_callback(const std::string& callback_id,
                                    const nlohmann::json& payload,
                                    const std::string& default_action);

private:
  callback_outcome resolve(const std::string& callback_id,
                           storage::callback_action action,
                           const nlohmann::json& payload,
                           const std::string& error);
  callback_outcome resolve_on(pqxx::connection_base& conn,
                              const std::string& database,
                              const std::string& callback_id,
                              storage::callback_action action,
                              const nlohmann::json& payload,
                              const std::string& error);

  /// Runs `fn(conn)` on the kept connection to database `name`, taking
  /// turns with other callers; a broken connection is dropped (the next
  /// call reconnects) and the error rethrown.
  template <class F>
  auto on_database(const std::string& name, F fn);

  caf::actor_system& sys_;
  runtime_config cfg_;
  std::shared_ptr<const registry> reg_;
  // A gate shared with other runtimes (may be null); it outlives this one.
  std::shared_ptr<idle_poll_gate> gate_;
  std::unique_ptr<caf::actor> hooks_;
  // The connections callback resolutions and enqueues reuse, one per
  // database, opened on first use.
  struct connections;
  std::unique_ptr<connections> conns_;
  std::string worker_id_;
  std::shared_ptr<registry_runner> runner_;
  // With [http] listen: the metrics and health the endpoint serves.
  std::shared_ptr<prometheus_observer> observer_;
  std::unique_ptr<http_endpoint> http_;
  // One supervisor per database with queues or schedules on this node
  // (behind a pointer so this header needs only caf/fwd.hpp).
  struct shards;
  std::shared_ptr<shards> shards_;
  std::shared_future<caf::error> ended_;
  bool stopped_ = false;
  stop_report stopped_report_;
};

} // namespace aw
