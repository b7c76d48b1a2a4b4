#include "actor_worker/storage/transaction_pool.hpp"

#include <algorithm>
#include <stdexcept>

#include <pqxx/except>

namespace aw::storage {

transaction_pool::transaction_pool(job_store_options opts,
                                   std::vector<std::string> observed_kinds,
                                   follow_up_function follow_ups, int size,
                                   std::chrono::milliseconds limit)
  : opts_(std::move(opts)), observed_kinds_(std::move(observed_kinds)),
    follow_ups_(std::move(follow_ups)), size_(std::max(size, 1)),
    limit_(limit) {
  // nop
}

transaction_pool::~transaction_pool() = default;

std::chrono::milliseconds
transaction_pool::limit_for(int64_t deadline_ms,
                            std::chrono::milliseconds elapsed) const {
  using std::chrono::milliseconds;
  // A lease lasts the reclaim window past the last heartbeat round that
  // saw it; rounds come every heartbeat_interval.
  auto lease = opts_.reclaim_window - 2 * opts_.heartbeat_interval;
  auto limit = std::min(limit_, std::max(lease, milliseconds{1000}));
  if (deadline_ms > 0)
    limit = std::min(limit, milliseconds{deadline_ms} - elapsed);
  return std::max(limit, milliseconds{1});
}

std::unique_ptr<job_store>
transaction_pool::lend(const cancellation_token& cancel) {
  std::unique_ptr<job_store> store;
  {
    std::unique_lock<std::mutex> guard{mtx_};
    while (idle_.empty() && made_ >= size_) {
      if (cancel.cancelled())
        return nullptr;
      // The token has no waiting of its own to join: look again often.
      freed_.wait_for(guard, std::chrono::milliseconds{20});
    }
    if (!idle_.empty()) {
      store = std::move(idle_.back());
      idle_.pop_back();
      return store;
    }
    ++made_;
  }
  store = std::make_unique<job_store>(opts_);
  store->observe(observed_kinds_);
  store->set_follow_ups(follow_ups_);
  return store;
}

template <class F>
auto transaction_pool::on_store(std::unique_ptr<job_store> store, F fn) {
  auto give_back = [&] {
    std::lock_guard<std::mutex> guard{mtx_};
    idle_.push_back(std::move(store));
    freed_.notify_one();
  };
  try {
    auto out = fn(*store);
    give_back();
    return out;
  } catch (const pqxx::broken_connection&) {
    store->disconnect();
    give_back();
    throw;
  } catch (const pqxx::in_doubt_error&) {
    store->disconnect();
    give_back();
    throw;
  } catch (...) {
    give_back();
    throw;
  }
}

namespace {

/// Why a run got no connection of the pool.
std::string stopped_waiting(const cancellation_token& cancel, int size) {
  return "the run was stopped (" + cancel.reason()
         + ") while it waited for a connection of the transactional pool "
           "(database.transactional_pool_size " + std::to_string(size) + ")";
}

} // namespace

job_outcome
transaction_pool::transact(const job_outcome& job, int64_t deadline_ms,
                           std::chrono::steady_clock::time_point started,
                           const cancellation_token& cancel,
                           const job_store::transactional_body& body) {
  auto store = lend(cancel);
  if (!store) {
    job_outcome out = job;
    out.kind = outcome_kind::retryable_failure;
    out.message = stopped_waiting(cancel, size_);
    return out;
  }
  return on_store(std::move(store), [&](job_store& s) {
    auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
    return s.transact(job, limit_for(deadline_ms, elapsed), cancel, body);
  });
}

std::optional<std::string>
transaction_pool::register_callback(int64_t job_id, int64_t lease,
                                    std::chrono::milliseconds timeout,
                                    const cancellation_token& cancel) {
  auto store = lend(cancel);
  if (!store)
    throw std::runtime_error("registering a callback id: "
                             + stopped_waiting(cancel, size_));
  return on_store(std::move(store), [&](job_store& s) {
    return s.register_callback(job_id, lease, timeout);
  });
}

} // namespace aw::storage
