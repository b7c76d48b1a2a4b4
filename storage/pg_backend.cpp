#include "actor_worker/storage/pg_backend.hpp"

#include <pqxx/pqxx>

#include "actor_worker/storage/db_error.hpp"
#include "actor_worker/storage/periodic_schedules.hpp"
#include "actor_worker/storage/schema_check.hpp"

namespace aw::storage {

backend::~backend() = default;

namespace {

class pg_backend final : public backend {
public:
  explicit pg_backend(job_store_options opts) : store_(std::move(opts)) {
    // nop
  }

  job_store& store() {
    return store_;
  }

  caf::expected<claim_result> claim(const claim_request& req) override {
    return guarded("claiming jobs", [&] {
      return store_.claim(req.queue, req.limit, req.max_bytes,
                          req.default_deadline_ms);
    });
  }

  caf::expected<std::pair<std::vector<finish_report>, claim_result>>
  finish_and_claim(const std::vector<job_outcome>& outcomes,
                   const claim_request& req, bool in_doubt) override {
    return guarded("recording outcomes and claiming", [&] {
      return store_.finish_and_claim(outcomes, req.queue, req.limit,
                                     req.max_bytes, req.default_deadline_ms,
                                     in_doubt);
    });
  }

  caf::expected<std::vector<finish_report>>
  finish(const std::vector<job_outcome>& outcomes, bool in_doubt,
         failure_follow_ups failures) override {
    return guarded("recording outcomes", [&] {
      return store_.finish(outcomes, in_doubt, failures);
    });
  }

  caf::expected<std::vector<int64_t>>
  heartbeat(const std::vector<int64_t>& leases) override {
    return guarded("reading which leases are still ours",
                   [&] { return store_.heartbeat(leases); });
  }

  caf::expected<std::vector<int64_t>>
  cancel_requests(const std::vector<int64_t>& jobs) override {
    return guarded("reading cancel requests",
                   [&] { return store_.cancel_requests(jobs); });
  }

  caf::expected<std::vector<std::pair<int64_t, double>>>
  wait_times(const std::vector<int64_t>& jobs) override {
    return guarded("reading the due times of claimed jobs",
                   [&] { return store_.wait_times(jobs); });
  }

  caf::expected<bool> refresh_node(int64_t held, bool candidate) override {
    return guarded("refreshing this process's row in worker_nodes and the "
                   "leader lease",
                   [&] { return store_.refresh_node(held, candidate); });
  }

  caf::expected<bool> resign() override {
    return guarded("giving up the leader lease",
                   [&] { return store_.resign(); });
  }

  caf::error leave() override {
    auto done = guarded("deleting this process's row in worker_nodes", [&] {
      store_.leave();
      return true;
    });
    return done ? caf::error{} : std::move(done.error());
  }

  caf::expected<std::vector<std::string>> apply_queue_controls() override {
    return guarded("writing the configured queue limits into queue_controls",
                   [&] { return store_.apply_queue_controls(); });
  }

  caf::expected<queue_samples> sample_queues() override {
    return guarded("sampling the queues' depth",
                   [&] { return store_.sample_queues(); });
  }

  caf::expected<std::vector<periodic_row>> periodic_rows() override {
    return guarded("reading periodic_schedules", [&] {
      pqxx::read_transaction tx(store_.connection(), "aw_periodic_rows");
      return storage::periodic_rows(tx);
    });
  }

  caf::expected<int64_t> enqueue_tick(const periodic_tick& tick) override {
    return guarded("enqueueing a periodic tick", [&] {
      pqxx::work tx(store_.connection(), "aw_periodic_tick");
      auto id = enqueue_periodic_tick(tx, tick);
      tx.commit();
      return id;
    });
  }

  caf::expected<std::vector<rescued_job>> rescue(int limit) override {
    return guarded("rescuing expired jobs",
                   [&] { return store_.rescue(limit); });
  }

  caf::error enqueue_follow_ups(const std::vector<job_event>& events) override {
    auto done = guarded("enqueueing follow-ups of committed transitions", [&] {
      store_.enqueue_follow_ups(events);
      return true;
    });
    return done ? caf::error{} : std::move(done.error());
  }

  caf::expected<int64_t> release(const std::vector<held_job>& jobs,
                                 bool started) override {
    return guarded("releasing jobs",
                   [&] { return store_.release(jobs, started); });
  }

  caf::error record_starts(const std::vector<held_job>& jobs) override {
    auto done = guarded("recording started jobs", [&] {
      store_.record_starts(jobs);
      return true;
    });
    return done ? caf::error{} : std::move(done.error());
  }

  caf::expected<int64_t> delete_expired(int batch) override {
    return guarded("deleting expired finished jobs",
                   [&] { return store_.delete_expired(batch); });
  }

  caf::expected<std::vector<std::string>> vacuum(int64_t min_dead,
                                                 double share) override {
    return guarded("vacuuming the queue tables",
                   [&] { return store_.vacuum(min_dead, share); });
  }

  caf::error check_schema() override {
    auto missing = guarded("checking the database schema", [&] {
      return missing_schema(store_.connection());
    });
    if (!missing) {
      // Whatever failed, start the next check on a fresh connection.
      store_.disconnect();
      return std::move(missing.error());
    }
    if (missing->empty())
      return {};
    return make_error(ec::schema_outdated, describe_missing_schema(*missing));
  }

private:
  /// Runs `fn`; an exception becomes an error that says what failed, and a
  /// broken connection is dropped so the next call reconnects.
  template <class F>
  auto guarded(const char* what, F fn) -> caf::expected<decltype(fn())> {
    try {
      return fn();
    } catch (const std::exception& e) {
      if (classify(e) != ec::database_error)
        store_.disconnect();
      return to_error(e, what);
    }
  }

  job_store store_;
};

} // namespace

std::unique_ptr<backend>
make_pg_backend(job_store_options opts, std::vector<std::string> observed_kinds,
                follow_up_function follow_ups,
                std::optional<std::vector<std::string>> served_kinds) {
  auto out = std::make_unique<pg_backend>(std::move(opts));
  out->store().observe(observed_kinds);
  if (served_kinds)
    out->store().serve(*served_kinds);
  out->store().set_follow_ups(std::move(follow_ups));
  return out;
}

} // namespace aw::storage
